/**
 * Webhook endpoints over HTTP against a started platform: every route and status, every validation rule,
 * the per-account limit, keys and accounts, the signing secret shown only on create and rotate, and the
 * loopback/private refusals of a platform that does not allow them.
 */
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { startPlatform, removeDir, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';
import { http } from './helpers/http.js';
import { alertsTenant, startReceiver, type Receiver } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';

let p: Platform;
let strict: Platform;
let receiver: Receiver;
t.before(async () => {
  [p, strict] = await Promise.all([startPlatform({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } }), startPlatform()]);
  receiver = await startReceiver();
});
t.teardown(async () => {
  await receiver.close();
  for (const x of [p, strict]) {
    await x.stop();
    removeDir(x.dataDir);
  }
});

const BASE = '/v1/webhook-endpoints';
const fieldsShape = (t: Test, body: any) => {
  t.type(body.message, 'string');
  t.ok(Array.isArray(body.errors), 'errors is an array');
  for (const e of body.errors) t.same(Object.keys(e).sort(), ['field', 'message']);
};

t.test('create, read, list, update, rotate, delete', async (t) => {
  const { api } = await alertsTenant(p);
  const created = await api('POST', BASE, { name: 'ops', url: receiver.url, event_types: ['alerts.triggered', 'alerts.resolved'], headers: { 'X-Team': 'ops' } });
  t.equal(created.status, 201);
  const e = created.body;
  t.match(e.id, /^whe_[A-Za-z0-9]+$/);
  t.match(e.signing_secret, /^whsec_[A-Za-z0-9+/]+=*$/);
  t.same(
    { name: e.name, url: e.url, event_types: e.event_types, headers: e.headers, timeout_ms: e.timeout_ms, enabled: e.enabled },
    { name: 'ops', url: receiver.url, event_types: ['alerts.triggered', 'alerts.resolved'], headers: { 'x-team': 'ops' }, timeout_ms: 5000, enabled: true },
    'defaults: timeout_ms 5000, enabled; header names in lower case',
  );
  t.ok(Date.parse(e.created_at) && e.created_at === e.updated_at);

  const read = await api('GET', `${BASE}/${e.id}`);
  t.equal(read.status, 200);
  t.notOk('signing_secret' in read.body, 'the secret is never read back');
  t.notOk('secret' in read.body);
  const { signing_secret: _s, ...shown } = e;
  t.same(read.body, shown);

  const list = await api('GET', BASE);
  t.equal(list.status, 200);
  t.same(list.body, { data: [shown] });
  t.notOk(list.text.includes(e.signing_secret));

  const patched = await api('PATCH', `${BASE}/${e.id}`, { enabled: false, timeout_ms: 1000 });
  t.equal(patched.status, 200);
  t.equal(patched.body.enabled, false);
  t.equal(patched.body.timeout_ms, 1000);
  t.equal(patched.body.name, 'ops', 'fields not given are kept');
  t.ok(patched.body.updated_at >= e.updated_at);
  t.same((await api('GET', `${BASE}?enabled=false`)).body.data.map((x: any) => x.id), [e.id], 'filter enabled=false');
  t.same((await api('GET', `${BASE}?enabled=true`)).body.data, [], 'filter enabled=true');
  const renamed = await api('PATCH', `${BASE}/${e.id}`, { name: 'ops 2', event_types: ['alerts.resolved'], headers: {}, url: `${receiver.url}?v=2`, enabled: true });
  t.same([renamed.body.name, renamed.body.event_types, renamed.body.headers, renamed.body.url], ['ops 2', ['alerts.resolved'], {}, `${receiver.url}?v=2`]);
  t.equal((await api('PATCH', `${BASE}/${e.id}`, {})).status, 200, 'an empty patch changes nothing');

  const rotated = await api('POST', `${BASE}/${e.id}/rotate-secret`);
  t.equal(rotated.status, 200);
  t.match(rotated.body.signing_secret, /^whsec_/);
  t.not(rotated.body.signing_secret, e.signing_secret, 'a new secret');
  t.equal(rotated.body.id, e.id);
  t.notOk((await api('GET', `${BASE}/${e.id}`)).text.includes(rotated.body.signing_secret));

  const deleted = await api('DELETE', `${BASE}/${e.id}`);
  t.equal(deleted.status, 204);
  t.equal(deleted.text, '');
  for (const [method, path] of [['GET', `${BASE}/${e.id}`], ['PATCH', `${BASE}/${e.id}`], ['DELETE', `${BASE}/${e.id}`], ['POST', `${BASE}/${e.id}/rotate-secret`], ['POST', `${BASE}/${e.id}/test`], ['GET', `${BASE}/${e.id}/deliveries`]]) {
    const r = await api(method, path, method === 'PATCH' ? { name: 'x' } : undefined);
    t.equal(r.status, 404, `${method} ${path} after delete`);
    t.same(r.body.errors, [{ field: 'id', message: 'webhook endpoint not found' }]);
  }
  t.same((await api('GET', BASE)).body, { data: [] });
});

t.test('keys: missing, invalid and another family\'s are 401 (contract 7.2 has no 403), another account sees 404', async (t) => {
  const { api } = await alertsTenant(p, 'Owner');
  const other = await alertsTenant(p, 'Other');
  const e = (await api('POST', BASE, { name: 'a', url: receiver.url, event_types: ['alerts.triggered'] })).body;
  const none = await http(p.edge, 'GET', BASE);
  t.equal(none.status, 401);
  fieldsShape(t, none.body);
  t.equal((await http(p.edge, 'GET', BASE, { headers: { 'x-api-key': 'sbk_nope' } })).status, 401);
  const account = await admin(p)('POST', '/accounts', { name: 'Agents only' });
  const agentsKey = await admin(p)('POST', '/keys', { account_id: account.body.id, scope: 'agents' });
  const wrong = await http(p.edge, 'GET', BASE, { headers: { 'x-api-key': agentsKey.body.key } });
  t.equal(wrong.status, 401);
  fieldsShape(t, wrong.body);
  t.same((await other.api('GET', BASE)).body, { data: [] }, "another account's list does not show it");
  for (const [method, path, body] of [['GET', `${BASE}/${e.id}`], ['PATCH', `${BASE}/${e.id}`, { enabled: false }], ['POST', `${BASE}/${e.id}/rotate-secret`], ['POST', `${BASE}/${e.id}/test`], ['GET', `${BASE}/${e.id}/deliveries`], ['DELETE', `${BASE}/${e.id}`]] as const) {
    t.equal((await other.api(method, path, body)).status, 404, `another account: ${method} ${path}`);
  }
  t.equal((await api('GET', `${BASE}/${e.id}`)).body.enabled, true, 'untouched by the other account');
});

t.test('malformed ids are 422', async (t) => {
  const { api } = await alertsTenant(p);
  for (const [method, path] of [['GET', `${BASE}/nope`], ['PATCH', `${BASE}/whe_a-b`], ['DELETE', `${BASE}/ar_abc`], ['POST', `${BASE}/whe_%20/rotate-secret`], ['GET', `${BASE}/whe_abc/deliveries/nope`], ['POST', `${BASE}/whe_abc/deliveries/whd_a.b/redeliver`]]) {
    const r = await api(method, path, method === 'PATCH' ? {} : undefined);
    t.equal(r.status, 422, `${method} ${path}`);
    fieldsShape(t, r.body);
  }
});

t.test('validation: every rule is a 400 naming its field', async (t) => {
  const { api } = await alertsTenant(p);
  const ok = { name: 'a', url: receiver.url, event_types: ['alerts.triggered'] };
  const cases: Array<[string, Record<string, unknown>, string, string?]> = [
    ['no name', { ...ok, name: undefined }, 'name'],
    ['empty name', { ...ok, name: '' }, 'name', 'name must be between 1 and 128 characters'],
    ['long name', { ...ok, name: 'x'.repeat(129) }, 'name', 'name must be between 1 and 128 characters'],
    ['name not a string', { ...ok, name: 5 }, 'name'],
    ['no url', { ...ok, url: undefined }, 'url'],
    ['url not a string', { ...ok, url: 7 }, 'url'],
    ['url not a URL', { ...ok, url: 'not a url' }, 'url', 'url must be an absolute http or https URL of at most 2048 characters'],
    ['url ftp', { ...ok, url: 'ftp://127.0.0.1/x' }, 'url'],
    ['url file', { ...ok, url: 'file:///etc/passwd' }, 'url'],
    ['url too long', { ...ok, url: `${receiver.url}?${'a'.repeat(2048)}` }, 'url'],
    ['url with credentials', { ...ok, url: 'http://u:p@127.0.0.1/x' }, 'url', 'url must not carry a user name or password; send credentials in headers'],
    ['url host does not resolve', { ...ok, url: 'http://no-such-host.invalid/x' }, 'url', 'the host of url does not resolve'],
    ['no event_types', { ...ok, event_types: undefined }, 'event_types'],
    ['empty event_types', { ...ok, event_types: [] }, 'event_types'],
    ['unknown event type', { ...ok, event_types: ['alerts.fired'] }, 'event_types.0'],
    ['webhook.test is not subscribable', { ...ok, event_types: ['webhook.test'] }, 'event_types.0'],
    ['repeated event type', { ...ok, event_types: ['alerts.triggered', 'alerts.triggered'] }, 'event_types'],
    ['event_types not an array', { ...ok, event_types: 'alerts.triggered' }, 'event_types'],
    ['timeout_ms below 1000', { ...ok, timeout_ms: 999 }, 'timeout_ms', 'timeout_ms must be an integer from 1000 to 30000'],
    ['timeout_ms above 30000', { ...ok, timeout_ms: 30_001 }, 'timeout_ms'],
    ['timeout_ms not an integer', { ...ok, timeout_ms: 1500.5 }, 'timeout_ms'],
    ['timeout_ms a string', { ...ok, timeout_ms: '2000' }, 'timeout_ms'],
    ['enabled not a boolean', { ...ok, enabled: 'yes' }, 'enabled'],
    ['headers not an object', { ...ok, headers: ['a'] }, 'headers'],
    ['header value not a string', { ...ok, headers: { 'x-a': 1 } }, 'headers.x-a'],
    ['header name not a token', { ...ok, headers: { 'x a': '1' } }, 'headers.x a'],
    ['header value with a newline', { ...ok, headers: { 'x-a': 'a\r\nx-b: c' } }, 'headers.x-a'],
    ['header value too long', { ...ok, headers: { 'x-a': 'a'.repeat(1025) } }, 'headers.x-a'],
    ['header twice', { ...ok, headers: { 'X-A': '1', 'x-a': '2' } }, 'headers.x-a'],
    ['too many headers', { ...ok, headers: Object.fromEntries([...Array(21).keys()].map((i) => [`x-h${i}`, 'v'])) }, 'headers'],
    ['signing_secret given', { ...ok, signing_secret: 'whsec_abc' }, 'body'],
    ['unknown field', { ...ok, colour: 'red' }, 'body'],
  ];
  for (const header of ['Connection', 'keep-alive', 'Transfer-Encoding', 'TE', 'Upgrade', 'Proxy-Authorization', 'trailer', 'Host', 'Content-Length', 'content-type', 'User-Agent',
    'X-Service-Signature', 'x-service-timestamp', 'X-Service-Event-ID', 'webhook-id', 'Webhook-Timestamp', 'webhook-signature']) {
    cases.push([`reserved header ${header}`, { ...ok, headers: { [header]: 'x' } }, `headers.${header}`]);
  }
  for (const [what, body, field, message] of cases) {
    const r = await api('POST', BASE, body);
    t.equal(r.status, 400, `create: ${what}`);
    fieldsShape(t, r.body);
    const fields = r.body.errors.map((e: any) => e.field);
    t.ok(fields.some((f: string) => f === field || (field === 'body' && /body|colour|signing_secret/.test(f))), `${what}: names ${field} (got ${fields.join(', ')})`);
    if (message) t.ok(r.body.errors.some((e: any) => e.message === message), `${what}: "${message}"`);
  }
  t.equal((await api('POST', BASE, '[1]' as never)).status, 400, 'a body that is not an object');
  const e = (await api('POST', BASE, ok)).body;
  for (const [what, body, field] of cases.filter(([w]) => !/^no |unknown field|signing_secret/.test(w))) {
    const patch = Object.fromEntries(Object.entries(body).filter(([k, v]) => v !== (ok as any)[k]));
    if (Object.keys(patch).length === 0) continue;
    const r = await api('PATCH', `${BASE}/${e.id}`, patch);
    t.equal(r.status, 400, `update: ${what}`);
    t.ok(r.body.errors.some((x: any) => x.field === field), `update: ${what} names ${field}`);
  }
  t.equal((await api('PATCH', `${BASE}/${e.id}`, { signing_secret: 'whsec_x' })).status, 400, 'the secret cannot be patched');
  t.same((await api('GET', `${BASE}/${e.id}`)).body.name, 'a', 'nothing changed');
  t.equal((await api('GET', `${BASE}?enabled=maybe`)).status, 400);
  t.equal((await api('GET', `${BASE}/${e.id}/deliveries?limit=0`)).status, 400);
  t.equal((await api('GET', `${BASE}/${e.id}/deliveries?limit=101`)).status, 400);
  const badCursor = await api('GET', `${BASE}/${e.id}/deliveries?cursor=zzz`);
  t.equal(badCursor.status, 400);
  t.same(badCursor.body.errors, [{ field: 'cursor', message: 'malformed cursor' }]);
  for (const tm of [1000, 30_000]) t.equal((await api('PATCH', `${BASE}/${e.id}`, { timeout_ms: tm })).status, 200, `timeout_ms ${tm} is within`);
});

t.test('limit: 10 endpoints per account, the 11th is 409, also when created at once; a delete frees one', async (t) => {
  const { api } = await alertsTenant(p);
  const other = await alertsTenant(p);
  const body = (i: number) => ({ name: `e${i}`, url: receiver.url, event_types: ['alerts.triggered'] });
  const results = await Promise.all([...Array(14).keys()].map((i) => api('POST', BASE, body(i))));
  t.same(results.map((r) => r.status).sort(), [...Array(10).fill(201), ...Array(4).fill(409)], 'ten of fourteen concurrent creates succeed');
  const refused = results.find((r) => r.status === 409)!;
  t.same(refused.body, { message: 'an account may have at most 10 webhook endpoints', errors: [{ field: 'url', message: 'webhook endpoint limit reached' }] });
  t.equal((await api('GET', BASE)).body.data.length, 10);
  t.equal((await api('POST', BASE, body(99))).status, 409, 'the 11th');
  t.equal((await other.api('POST', BASE, body(0))).status, 201, 'the limit is per account');
  const first = results.find((r) => r.status === 201)!.body.id;
  t.equal((await api('DELETE', `${BASE}/${first}`)).status, 204);
  t.equal((await api('POST', BASE, body(100))).status, 201, 'a deleted endpoint frees its place');
  t.equal((await api('POST', BASE, body(101))).status, 409);
});

t.test('without WEBHOOK_ALLOW_PRIVATE_URLS: loopback and private destinations are refused, by address and by name', async (t) => {
  const { api } = await alertsTenant(strict);
  const port = receiver.port;
  const urls = [
    `http://localhost:${port}/x`, `http://127.0.0.1:${port}/x`, `http://127.1:${port}/x`, `http://2130706433:${port}/x`, `http://0x7f000001:${port}/x`, `http://0.0.0.0:${port}/x`,
    `http://[::1]:${port}/x`, `http://[::ffff:127.0.0.1]:${port}/x`, `http://[::ffff:7f00:1]/x`, `http://[::]/x`, `http://[0:0:0:0:0:0:0:1]/x`, `http://[fe80::1]/x`, `http://[fd00::1]/x`, `http://[64:ff9b::a9fe:a9fe]/x`,
    'http://169.254.169.254/latest/meta-data/', 'http://[::ffff:169.254.169.254]/', 'http://10.0.0.1/x', 'http://172.16.5.4/x', 'http://192.168.0.1/x', 'http://100.64.1.1/x', 'https://127.0.0.1/x',
    `http://LOCALHOST:${port}/x`,
  ];
  for (const url of urls) {
    const r = await api('POST', BASE, { name: 'a', url, event_types: ['alerts.triggered'] });
    t.equal(r.status, 400, url);
    t.same(r.body, { message: 'url resolves to a loopback or private address', errors: [{ field: 'url', message: 'url resolves to a loopback or private address' }] }, url);
  }
  t.same((await api('GET', BASE)).body, { data: [] }, 'nothing was created');
  // A public address is accepted (nothing is sent to it here).
  const pub = await api('POST', BASE, { name: 'pub', url: 'https://93.184.216.34/hook', event_types: ['alerts.triggered'] });
  t.equal(pub.status, 201);
  const moved = await api('PATCH', `${BASE}/${pub.body.id}`, { url: `http://localhost:${port}/x` });
  t.equal(moved.status, 400, 'an update to a private URL is refused too');
  t.equal((await api('GET', `${BASE}/${pub.body.id}`)).body.url, 'https://93.184.216.34/hook');
});

t.test('a name that does not resolve now is accepted; each attempt resolves it again, and fails as a network error', async (t) => {
  const { api } = await alertsTenant(strict);
  // `.test` is reserved (RFC 6761): no DNS answers it, on this machine or any other.
  const created = await api('POST', BASE, { name: 'later', url: 'https://hooks.switchboard.test/hook', event_types: ['alerts.triggered'] });
  t.equal(created.status, 201, 'accepted: DNS when an endpoint is saved does not judge its URL');
  t.equal((await api('POST', BASE, { name: 'never', url: 'http://hooks.example.invalid/x', event_types: ['alerts.triggered'] })).status, 400, '`.invalid` never resolves: refused');
  const local = await api('POST', BASE, { name: 'local', url: 'http://app.localhost/x', event_types: ['alerts.triggered'] });
  t.equal(local.status, 400, '`localhost` names are this host: private');
  t.equal(local.body.message, 'url resolves to a loopback or private address');
  const sent = await api('POST', `${BASE}/${created.body.id}/test`, {});
  t.equal(sent.status, 202, 'a test event is accepted');
  const attempt = await eventually(async () => {
    const d = (await api('GET', `${BASE}/${created.body.id}/deliveries/${sent.body.id}`)).body;
    return d.attempts?.length > 0 && d.attempts[0];
  }, 20_000, 'the first attempt');
  t.equal(attempt.response_status, null, 'no response: the name did not resolve');
  t.equal(attempt.error, 'network', 'a network error');
  t.match(attempt.error_detail, /ENOTFOUND|EAI_AGAIN/, `that the name did not resolve (${attempt.error_detail})`);
});

t.test('fast-check: any create body gets 201 or a 400 in the Alerts shape, never a 500', async (t) => {
  const { api } = await alertsTenant(p);
  const value = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }));
  const body = fc.record(
    {
      name: fc.oneof(fc.string({ maxLength: 140 }), value),
      // No random host names: each would be a DNS query leaving the machine.
      url: fc.oneof(fc.constantFrom(receiver.url, 'http://127.0.0.1:1/x', 'https://[::1]/x', 'ftp://127.0.0.1/x', 'http://u:p@127.0.0.1/x', 'http://no-such-host.invalid/'), fc.string(), value),
      event_types: fc.oneof(fc.subarray(['alerts.triggered', 'alerts.resolved']), fc.array(fc.string(), { maxLength: 3 }), value),
      headers: fc.oneof(fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), fc.string({ maxLength: 20 }), { maxKeys: 4 }), value),
      timeout_ms: fc.oneof(fc.integer({ min: -10, max: 40_000 }), value),
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
        return /^whe_/.test(r.body.id) && /^whsec_/.test(r.body.signing_secret);
      }
      return r.status === 400 && typeof r.body.message === 'string' && Array.isArray(r.body.errors) && r.body.errors.length > 0;
    }),
    { numRuns: 150 },
  );
  t.pass(`150 bodies, ${created} created`);
});

t.test('fast-check: any path id is a 404 or a 422 and any patch body a 200 or a 400, never a 500', async (t) => {
  const { api } = await alertsTenant(p);
  const e = (await api('POST', BASE, { name: 'a', url: receiver.url, event_types: ['alerts.triggered'] })).body;
  await fc.assert(
    // `.` and `..` are path segments a URL resolves away, not ids.
    fc.asyncProperty(fc.oneof(fc.string({ minLength: 1, maxLength: 40 }).filter((s) => s !== '.' && s !== '..'), fc.stringMatching(/^whe_[A-Za-z0-9]{1,20}$/)), async (id) => {
      const path = `${BASE}/${encodeURIComponent(id)}`;
      const [get, deliveries] = await Promise.all([api('GET', path), api('GET', `${path}/deliveries/whd_0`)]);
      const valid = /^whe_[A-Za-z0-9]+$/.test(id);
      return get.status === (valid ? 404 : 422) && [404, 422].includes(deliveries.status) && typeof get.body.message === 'string';
    }),
    { numRuns: 100 },
  );
  const patch = fc.dictionary(fc.constantFrom('name', 'url', 'event_types', 'headers', 'timeout_ms', 'enabled', 'other'), fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.constantFrom('alerts.triggered', 'alerts.resolved', 'x'))), { maxKeys: 4 });
  await fc.assert(
    fc.asyncProperty(patch, async (body) => {
      const r = await api('PATCH', `${BASE}/${e.id}`, body);
      return r.status === 200 ? r.body.id === e.id : r.status === 400 && Array.isArray(r.body.errors) && r.body.errors.length > 0;
    }),
    { numRuns: 150 },
  );
  t.pass('ids and patch bodies');
});
