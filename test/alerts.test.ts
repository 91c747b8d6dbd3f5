/**
 * Alert rules and active alerts over HTTP against a started platform: every route and status, every
 * validation rule and its message, the per-account limit, the four filters, keys and accounts, malformed ids,
 * and fast-check on bodies and ids. (Evaluation with real traffic: alerts.metrics.test.ts.)
 */
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { platformFor, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';
import { client, http } from './helpers/http.js';
import { alertsTenant } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';

let p: Platform;
t.before(async () => {
  p = await platformFor(t, { env: { ALERTS_EVAL_INTERVAL_MS: '600000' } });
});

const BASE = '/v1/alert-rules';
const rule = (over: Record<string, unknown> = {}) => ({ name: 'errors', metric: 'function_errors', operator: '>=', threshold_value: 3, window_duration: '5m', ...over });
const fieldsShape = (t: Test, body: any) => {
  t.type(body.message, 'string');
  t.ok(Array.isArray(body.errors), 'errors is an array');
  for (const e of body.errors) t.same(Object.keys(e).sort(), ['field', 'message']);
};

/** A project (agent) of the account, made through the Agents API with an agents key. */
async function projectOf(accountId: string): Promise<string> {
  const key = await admin(p)('POST', '/keys', { account_id: accountId, scope: 'agents' });
  const created = await client(p.edge, { 'x-api-key': key.body.key })('POST', '/v1/agents', { name: `P ${Math.random()}`, description: 'x' });
  if (created.status !== 201) throw new Error(`agent: ${created.status} ${created.text}`);
  return created.body.agentId;
}

t.test('create, read, list, patch, delete', async (t) => {
  const { api } = await alertsTenant(p);
  const created = await api('POST', BASE, rule());
  t.equal(created.status, 201);
  const r = created.body;
  t.match(r.id, /^ar_[A-Za-z0-9]+$/);
  t.match(r, { name: 'errors', project_id: null, metric: 'function_errors', operator: '>=', threshold_value: 3, window_duration: '5m', enabled: true });
  t.ok(Date.parse(r.created_at) > 0 && Date.parse(r.updated_at) > 0, 'timestamps');
  // Contract 3.1: a new rule is `ok` until its first evaluation, which follows at once.
  t.equal(r.current_state, 'ok');
  t.equal(r.current_value, null);
  t.equal(r.last_evaluated_at, null);
  t.equal(r.since, null);
  // An account without traffic has no data.
  const read = await eventually(async () => {
    const x = await api('GET', `${BASE}/${r.id}`);
    return x.body.last_evaluated_at ? x : undefined;
  }, 10_000, 'the first evaluation');
  t.equal(read.status, 200);
  t.match(read.body, { ...r, current_state: 'no_data', current_value: null, last_evaluated_at: String, since: String });

  const patched = await api('PATCH', `${BASE}/${r.id}`, { name: 'renamed', threshold_value: 0 });
  t.equal(patched.status, 200);
  t.match(patched.body, { id: r.id, name: 'renamed', threshold_value: 0, metric: 'function_errors', created_at: r.created_at });
  t.ok(Date.parse(patched.body.updated_at) >= Date.parse(r.updated_at));
  const listed = await api('GET', BASE);
  t.same(listed.body.data, [patched.body], 'the list shows the PATCH just answered');

  const disabled = await api('PATCH', `${BASE}/${r.id}`, { enabled: false });
  t.equal(disabled.body.enabled, false);
  t.equal((await api('DELETE', `${BASE}/${r.id}`)).status, 204);
  t.equal((await api('GET', `${BASE}/${r.id}`)).status, 404);
  t.equal((await api('DELETE', `${BASE}/${r.id}`)).status, 404);
  t.equal((await api('PATCH', `${BASE}/${r.id}`, { name: 'x' })).status, 404);
  t.same((await api('GET', BASE)).body, { data: [] });
});

t.test('project_id: null is account-wide; a project of the account; another account\'s is 422', async (t) => {
  const a = await alertsTenant(p, 'Proj A');
  const b = await alertsTenant(p, 'Proj B');
  const pa = await projectOf(a.accountId);
  const pb = await projectOf(b.accountId);
  const ok = await a.api('POST', BASE, rule({ project_id: pa }));
  t.equal(ok.status, 201);
  t.equal(ok.body.project_id, pa);
  const other = await a.api('POST', BASE, rule({ project_id: pb }));
  t.equal(other.status, 422);
  fieldsShape(t, other.body);
  t.same(other.body.errors, [{ field: 'project_id', message: 'project_id must be null or the id of a project of the account' }]);
  t.equal((await a.api('POST', BASE, rule({ project_id: 'agt_nope' }))).status, 422);
  t.equal((await a.api('PATCH', `${BASE}/${ok.body.id}`, { project_id: pb })).status, 422);
  const wide = await a.api('PATCH', `${BASE}/${ok.body.id}`, { project_id: null });
  t.equal(wide.status, 200);
  t.equal(wide.body.project_id, null);
});

t.test('every validation rule answers 400 with its message', async (t) => {
  const { api } = await alertsTenant(p, 'Validation');
  const cases: Array<[Record<string, unknown>, string, string]> = [
    [rule({ name: '' }), 'name', 'name must be between 1 and 128 characters'],
    [rule({ name: 'x'.repeat(129) }), 'name', 'name must be between 1 and 128 characters'],
    [rule({ name: 5 }), 'name', 'name must be between 1 and 128 characters'],
    [rule({ metric: 'cpu' }), 'metric', 'metric must be one of turn_latency_p50, turn_latency_p95, api_errors, function_errors, call_crashes, call_volume'],
    [rule({ operator: '==' }), 'operator', 'operator must be one of >, <, >=, <='],
    [rule({ threshold_value: -1 }), 'threshold_value', 'threshold_value must be a non-negative integer'],
    [rule({ threshold_value: 1.5 }), 'threshold_value', 'threshold_value must be a non-negative integer'],
    [rule({ threshold_value: '3' }), 'threshold_value', 'threshold_value must be a non-negative integer'],
    [rule({ window_duration: '15m' }), 'window_duration', 'window_duration must be one of 5m, 10m, 60m'],
    [rule({ enabled: 'yes' }), 'enabled', 'enabled must be a boolean'],
    [rule({ project_id: 7 }), 'project_id', 'project_id must be a string or null'],
  ];
  for (const [body, field, message] of cases) {
    const r = await api('POST', BASE, body);
    t.equal(r.status, 400, `${field}: ${JSON.stringify(body[field])}`);
    fieldsShape(t, r.body);
    t.same(r.body.errors, [{ field, message }], field);
  }
  for (const missing of ['name', 'metric', 'operator', 'threshold_value', 'window_duration']) {
    const body: Record<string, unknown> = rule();
    delete body[missing];
    const r = await api('POST', BASE, body);
    t.equal(r.status, 400, `without ${missing}`);
    t.equal(r.body.errors[0].field, missing);
  }
  const extra = await api('POST', BASE, rule({ colour: 'red' }));
  t.equal(extra.status, 400, 'unknown fields are refused');
  const created = (await api('POST', BASE, rule())).body;
  for (const [body, field] of [[{ threshold_value: -5 }, 'threshold_value'], [{ metric: 'x' }, 'metric'], [{ current_state: 'ok' }, 'body'], [{ id: 'ar_x' }, 'body']] as const) {
    const r = await api('PATCH', `${BASE}/${created.id}`, body);
    t.equal(r.status, 400, `PATCH ${JSON.stringify(body)}`);
    fieldsShape(t, r.body);
    if (field !== 'body') t.equal(r.body.errors[0].field, field);
  }
  const notJson = await http(p.edge, 'POST', BASE, { raw: 'nope', headers: { 'x-api-key': (await alertsTenant(p, 'V2')).key, 'content-type': 'application/json' } });
  t.equal(notJson.status, 400);
});

t.test('malformed ids are 422; unknown ones 404', async (t) => {
  const { api } = await alertsTenant(p, 'Ids');
  for (const id of ['nope', 'ar_', 'ar_a-b', 'whe_abc', 'AR_abc']) {
    for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'x' }], ['DELETE', undefined]] as const) {
      const r = await api(method, `${BASE}/${encodeURIComponent(id)}`, body);
      t.equal(r.status, 422, `${method} ${id}`);
      fieldsShape(t, r.body);
    }
  }
  const unknown = await api('GET', `${BASE}/ar_doesnotexist`);
  t.equal(unknown.status, 404);
  t.same(unknown.body, { message: 'alert rule not found', errors: [{ field: 'id', message: 'alert rule not found' }] });
});

t.test('10 rules per account; the 11th is 409; deleting one frees a place', async (t) => {
  const { api } = await alertsTenant(p, 'Limit');
  const ids: string[] = [];
  const made = await Promise.all(Array.from({ length: 12 }, (_, i) => api('POST', BASE, rule({ name: `r${i}` }))));
  t.same(made.map((r) => r.status).sort(), [...Array(10).fill(201), 409, 409], 'concurrent creates: exactly 10 win');
  for (const r of made) if (r.status === 201) ids.push(r.body.id);
  const over = await api('POST', BASE, rule());
  t.equal(over.status, 409);
  t.same(over.body, { message: 'an account may have at most 10 alert rules', errors: [{ field: 'alert_rules', message: 'alert rule limit reached' }] });
  t.equal((await (await alertsTenant(p, 'Limit other')).api('POST', BASE, rule())).status, 201, 'the limit is per account');
  t.equal((await api('DELETE', `${BASE}/${ids[0]}`)).status, 204);
  t.equal((await api('POST', BASE, rule())).status, 201);
});

t.test('filters: enabled, metric, project_id, state', async (t) => {
  const { api, accountId } = await alertsTenant(p, 'Filters');
  const project = await projectOf(accountId);
  const a = (await api('POST', BASE, rule({ name: 'a', metric: 'api_errors' }))).body;
  const b = (await api('POST', BASE, rule({ name: 'b', metric: 'call_volume', enabled: false, project_id: project }))).body;
  // `call_volume < 1` over a project without traffic: no data, as is every rule here.
  const c = (await api('POST', BASE, rule({ name: 'c', metric: 'api_errors', project_id: project }))).body;
  const names = async (q: string) => (await api('GET', `${BASE}${q}`)).body.data.map((r: any) => r.name).sort();
  t.same(await names(''), ['a', 'b', 'c']);
  t.same(await names('?enabled=true'), ['a', 'c']);
  t.same(await names('?enabled=false'), ['b']);
  t.same(await names('?metric=api_errors'), ['a', 'c']);
  t.same(await names(`?project_id=${project}`), ['b', 'c']);
  t.same(await names(`?project_id=${project}&metric=api_errors`), ['c']);
  t.same(await names('?state=ok'), ['b'], 'a disabled rule stays ok: never evaluated');
  t.same(await names('?state=no_data'), ['a', 'c']);
  t.same(await names('?state=alert'), []);
  t.ok(a && b && c);
  for (const q of ['?enabled=yes', '?metric=cpu', '?state=firing']) {
    const r = await api('GET', `${BASE}${q}`);
    t.equal(r.status, 400, q);
    fieldsShape(t, r.body);
  }
  t.same(await names('?page=2&limit=1'), await names(''), 'no pagination: other parameters are ignored and all results returned');
});

t.test('keys: alerts scope only, own account only', async (t) => {
  const a = await alertsTenant(p, 'Keys A');
  const b = await alertsTenant(p, 'Keys B');
  const mine = (await a.api('POST', BASE, rule())).body;
  t.equal((await b.api('GET', `${BASE}/${mine.id}`)).status, 404, "another account's rule is not found");
  t.equal((await b.api('PATCH', `${BASE}/${mine.id}`, { name: 'x' })).status, 404);
  t.equal((await b.api('DELETE', `${BASE}/${mine.id}`)).status, 404);
  t.same((await b.api('GET', BASE)).body, { data: [] });
  t.same((await b.api('GET', '/v1/alerts')).body, { data: [] });
  const none = await http(p.edge, 'GET', BASE);
  t.equal(none.status, 401);
  fieldsShape(t, none.body);
  t.equal((await http(p.edge, 'GET', '/v1/alerts', { headers: { 'x-api-key': 'sbk_nope' } })).status, 401);
  const agentsKey = await admin(p)('POST', '/keys', { account_id: a.accountId, scope: 'agents' });
  // Contract 7.2 has no 403: a key that is not an Alerts key is an invalid key here.
  for (const path of [BASE, '/v1/alerts']) {
    const wrong = await http(p.edge, 'GET', path, { headers: { 'x-api-key': agentsKey.body.key } });
    t.equal(wrong.status, 401, `an Agents key on ${path}`);
    t.equal(wrong.body.message, 'invalid API key: this key is for the agents API');
    fieldsShape(t, wrong.body);
  }
  t.equal((await http(p.edge, 'POST', BASE, { headers: { 'x-api-key': agentsKey.body.key }, body: {} })).status, 401, 'and on a write');
});

t.test('a key issued with a project_id reaches only its project\'s rules, and no webhook endpoint', async (t) => {
  const { api, accountId } = await alertsTenant(p, 'Bound');
  const [p1, p2] = [await projectOf(accountId), await projectOf(accountId)];
  const issued = await admin(p)('POST', '/keys', { account_id: accountId, scope: 'alerts', project_id: p1 });
  t.equal(issued.status, 201, 'operator.md: the admin API accepts a project_id for any scope');
  t.equal(issued.body.project_id, p1);
  const bound = client(p.edge, { 'x-api-key': issued.body.key });
  const wide = (await api('POST', BASE, rule({ name: 'wide' }))).body;
  const other = (await api('POST', BASE, rule({ name: 'other', project_id: p2 }))).body;
  const mine = await bound('POST', BASE, rule({ name: 'mine', project_id: p1 }));
  t.equal(mine.status, 201, 'a rule of its project');
  t.equal(mine.body.project_id, p1);

  // Another project's rule and an account-wide one are absent and not found, as another account's are.
  const names = async (path: string) => (await bound('GET', path)).body.data.map((r: any) => r.name);
  t.same(await names(BASE), ['mine'], 'the list holds its project\'s rules only');
  t.same(await names(`${BASE}?project_id=${p2}`), [], 'a filter naming another project finds nothing');
  t.same(await names(`${BASE}?project_id=${p1}`), ['mine']);
  t.same(await names('/v1/alerts'), []);
  for (const r of [other, wide]) {
    for (const [method, body] of [['GET'], ['PATCH', { enabled: false }], ['DELETE']] as const) {
      const x = await bound(method, `${BASE}/${r.id}`, body);
      t.equal(x.status, 404, `${method} the ${r.name} rule`);
      fieldsShape(t, x.body);
    }
  }
  const untouched = await api('GET', BASE);
  t.same(untouched.body.data.map((r: any) => [r.name, r.enabled]), [['wide', true], ['other', true], ['mine', true]], 'neither changed nor deleted');

  // Creating or moving a rule out of its project: another project, or none (account-wide; the create's default).
  const message = `this key is bound to project ${p1}: project_id must be that project`;
  for (const body of [rule({ project_id: p2 }), rule({ project_id: null }), rule()] as Array<Record<string, unknown>>) {
    const x = await bound('POST', BASE, body);
    t.equal(x.status, 422, `create with project_id ${JSON.stringify(body.project_id)}`);
    t.same(x.body.errors, [{ field: 'project_id', message }]);
  }
  for (const project_id of [p2, null]) {
    const x = await bound('PATCH', `${BASE}/${mine.body.id}`, { project_id });
    t.equal(x.status, 422, `move to ${project_id}`);
    t.same(x.body.errors, [{ field: 'project_id', message }]);
  }
  t.equal((await bound('PATCH', `${BASE}/${mine.body.id}`, { project_id: p1, name: 'still mine' })).status, 200, 'naming its own project is fine');
  t.same((await api('GET', BASE)).body.data.map((r: any) => r.name), ['wide', 'other', 'still mine'], 'nothing was created by the refusals');

  // Webhook endpoints serve every project of the account: refused on every route, before the body is read.
  const endpoint = (await api('POST', '/v1/webhook-endpoints', { name: 'oncall', url: 'https://hooks.example.com/x', event_types: ['alerts.triggered'] })).body;
  const W = `/v1/webhook-endpoints/${endpoint.id}`;
  for (const [method, path, body] of [
    ['GET', '/v1/webhook-endpoints'],
    ['POST', '/v1/webhook-endpoints', { name: 'mine', url: 'https://hooks.example.com/y', event_types: ['alerts.triggered'] }],
    ['POST', '/v1/webhook-endpoints', { not: 'valid' }],
    ['GET', W],
    ['PATCH', W, { enabled: false }],
    ['POST', `${W}/rotate-secret`],
    ['POST', `${W}/test`],
    ['GET', `${W}/deliveries`],
    ['GET', `${W}/deliveries/whd_any`],
    ['POST', `${W}/deliveries/whd_any/redeliver`],
    ['DELETE', W],
  ] as const) {
    const x = await bound(method, path, body);
    t.equal(x.status, 401, `${method} ${path}`);
    t.equal(x.body.message, `invalid API key for webhook endpoints: this key is bound to project ${p1}, and webhook endpoints serve every project of the account; use an Alerts key issued without project_id`);
    fieldsShape(t, x.body);
  }
  const after = await api('GET', W);
  t.match(after.body, { enabled: true, updated_at: endpoint.updated_at }, 'the endpoint is untouched (its secret not rotated)');
  t.equal((await api('GET', '/v1/webhook-endpoints')).body.data.length, 1);
});

t.test('a value that breaks two checks with the same message gets one field error', async (t) => {
  const { api } = await alertsTenant(p, 'Twice');
  const r = await api('POST', BASE, rule({ threshold_value: 2 ** 60 }));
  t.equal(r.status, 400);
  t.same(r.body.errors, [{ field: 'threshold_value', message: 'threshold_value must be a non-negative integer' }]);
});

t.test('GET /v1/alerts: the shape, its filters, and 400 on bad queries', async (t) => {
  const { api } = await alertsTenant(p, 'Active');
  // `call_volume <= 0` over an account without traffic has no data: nothing fires.
  await api('POST', BASE, rule({ metric: 'call_volume', operator: '<=', threshold_value: 0 }));
  const r = await api('GET', '/v1/alerts');
  t.equal(r.status, 200);
  t.same(r.body, { data: [] });
  t.equal((await api('GET', '/v1/alerts?metric=api_errors')).status, 200);
  t.equal((await api('GET', '/v1/alerts?metric=cpu')).status, 400);
  t.equal((await api('GET', '/v1/alerts?state=alert')).status, 200, 'a parameter it does not take is ignored');
});

t.test('query refusals name their parameter and rule: a repeated one, an empty project_id', async (t) => {
  const { api } = await alertsTenant(p, 'Queries');
  for (const [path, field, message] of [
    ['/v1/alert-rules?metric=call_volume&metric=api_errors', 'metric', 'metric may be given only once'],
    ['/v1/alerts?project_id=a&project_id=b', 'project_id', 'project_id may be given only once'],
    ['/v1/alert-rules?enabled=true&enabled=false', 'enabled', 'enabled may be given only once'],
    ['/v1/webhook-endpoints?enabled=true&enabled=true', 'enabled', 'enabled may be given only once'],
    ['/v1/webhook-endpoints/we_any/deliveries?limit=1&limit=2', 'limit', 'limit may be given only once'],
    ['/v1/alert-rules?project_id=', 'project_id', 'project_id must not be empty'],
    ['/v1/alerts?project_id=', 'project_id', 'project_id must not be empty'],
  ] as const) {
    const r = await api('GET', path);
    t.equal(r.status, 400, path);
    t.same(r.body.errors, [{ field, message }], path);
  }
});

t.test('fast-check: any create body gets 201 or a 400/422 in the Alerts shape, never a 500', async (t) => {
  const { api } = await alertsTenant(p, 'Fuzz');
  const value = fc.oneof(fc.string(), fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }));
  const body = fc.record(
    {
      name: fc.oneof(fc.string({ maxLength: 140 }), value),
      project_id: fc.oneof(fc.constant(null), fc.string({ maxLength: 20 }), value),
      metric: fc.oneof(fc.constantFrom('turn_latency_p50', 'turn_latency_p95', 'api_errors', 'function_errors', 'call_crashes', 'call_volume'), value),
      operator: fc.oneof(fc.constantFrom('>', '<', '>=', '<='), value),
      threshold_value: fc.oneof(fc.integer({ min: -5, max: 1_000_000 }), value),
      window_duration: fc.oneof(fc.constantFrom('5m', '10m', '60m'), value),
      enabled: fc.oneof(fc.boolean(), value),
    },
    { requiredKeys: [] },
  );
  let created = 0;
  await fc.assert(
    fc.asyncProperty(body, async (b) => {
      const r = await api('POST', BASE, b);
      if (r.status === 201) {
        created++;
        await api('DELETE', `${BASE}/${r.body.id}`);
        return /^ar_[A-Za-z0-9]+$/.test(r.body.id);
      }
      return (r.status === 400 || r.status === 422) && typeof r.body.message === 'string' && Array.isArray(r.body.errors) && r.body.errors.length > 0;
    }),
    { numRuns: 150 },
  );
  t.pass(`150 bodies, ${created} created`);
});

t.test('fast-check: any path id is 200, 404 or 422, never a 500', async (t) => {
  const { api } = await alertsTenant(p, 'Fuzz ids');
  await fc.assert(
    fc.asyncProperty(fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), fc.stringMatching(/^ar_[A-Za-z0-9]{1,20}$/)), async (id) => {
      const r = await api('GET', `${BASE}/${encodeURIComponent(id)}`);
      const malformed = !/^ar_[A-Za-z0-9]+$/.test(id);
      return malformed ? r.status === 422 || r.status === 404 : r.status === 404;
    }),
    { numRuns: 150 },
  );
  t.pass('150 ids');
});
