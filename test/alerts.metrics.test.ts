/**
 * Alert rules evaluated over real traffic against a started platform: chat turns whose function throws drive
 * `function_errors` until the rule fires (`alerts.triggered` reaches a real receiver, `/v1/alerts` lists it),
 * and it resolves (`alerts.resolved`) once it is back within its threshold; `call_volume`, the latency
 * percentiles and `api_errors` (a real 503: a turn that outlives the ask deadline) are each driven and
 * checked; a project without traffic is `no_data`. Evaluations every 300 ms (`ALERTS_EVAL_INTERVAL_MS`).
 */
import t from 'tap';
import { startPlatform, removeDir, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';
import { client } from './helpers/http.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { startReceiver, type Receiver } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';

const FUNCTIONS = {
  turn: `function turn(conv, message) {
    if (message === 'explode') throw new Error('boom');
    if (message === 'spin') { const end = Date.now() + 2500; while (Date.now() < end) {} return 'late'; }
    return 'fine';
  }`,
};

let p: Platform;
let c: ChatProject;
let receiver: Receiver;
let api: ReturnType<typeof client>;
t.before(async () => {
  p = await startPlatform({
    env: {
      ALERTS_EVAL_INTERVAL_MS: '300',
      API_ERRORS_FLUSH_MS: '200',
      PROJECTION_POLL_MS: '100',
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      ASK_TIMEOUT_MS: '1000',
      FUNCTION_TIMEOUT_MS: '5000',
      // A Chat turn is waited for within the connection's idle timeout, less 1 s: the 2.5 s turn of `spin`
      // outlives that wait, and the edge answers 503 (a real 5xx).
      EDGE_CONNECTION_TIMEOUT_MS: '2000',
    },
  });
  receiver = await startReceiver();
  c = await chatProject(p, { name: 'Alerting Co', functions: FUNCTIONS });
  const key = await admin(p)('POST', '/keys', { account_id: c.accountId, scope: 'alerts' });
  api = client(p.edge, { 'x-api-key': key.body.key });
  const endpoint = await api('POST', '/v1/webhook-endpoints', { name: 'ops', url: receiver.url, event_types: ['alerts.triggered', 'alerts.resolved'] });
  if (endpoint.status !== 201) throw new Error(`endpoint: ${endpoint.status} ${endpoint.text}`);
});
t.teardown(async () => {
  await receiver.close();
  await p.stop();
  removeDir(p.dataDir);
});

const rule = async (over: Record<string, unknown>) => {
  const r = await api('POST', '/v1/alert-rules', { name: String(over.metric), operator: '>=', threshold_value: 1, window_duration: '5m', project_id: c.agentId, ...over });
  if (r.status !== 201) throw new Error(`rule: ${r.status} ${r.text}`);
  return r.body;
};
const stateOf = async (id: string) => (await api('GET', `/v1/alert-rules/${id}`)).body;
const untilState = (id: string, state: string, what: string) =>
  eventually(async () => {
    const r = await stateOf(id);
    return r.current_state === state ? r : undefined;
  }, 30_000, what);

t.test('no_data without traffic', async (t) => {
  const created = await rule({ metric: 'function_errors' });
  t.equal(created.current_state, 'ok', 'ok until the first evaluation');
  const r = await untilState(created.id, 'no_data', 'evaluated at once after creation');
  t.equal(r.current_value, null);
  // And it stays so across scheduled evaluations.
  const later = await eventually(async () => {
    const x = await stateOf(r.id);
    return x.last_evaluated_at !== r.last_evaluated_at ? x : undefined;
  }, 10_000, 'a scheduled evaluation');
  t.equal(later.current_state, 'no_data');
  t.equal(later.since, r.since, 'since is kept while the state holds');
  t.equal((await api('DELETE', `/v1/alert-rules/${r.id}`)).status, 204);
});

t.test('function_errors from real chat turns: fires, is listed, resolves; the receiver sees both webhooks', async (t) => {
  const r = await rule({ name: 'function errors', metric: 'function_errors', threshold_value: 2 });
  const wide = await rule({ name: 'account-wide', metric: 'function_errors', threshold_value: 2, project_id: null });
  const id = (await c.chat('create', {})).body.conversation_id;
  for (const m of ['explode', 'hello', 'explode']) t.equal((await c.chat('respond', { conversation_id: id, message: m })).status, 200, m);
  const fired = await untilState(r.id, 'alert', 'the rule to fire');
  t.equal(fired.current_value, 2, 'two function errors in the window');
  t.ok(fired.since, 'since set');
  t.equal((await untilState(wide.id, 'alert', 'the account-wide rule to fire')).current_value, 2, 'the account counts its projects');

  const active = await api('GET', '/v1/alerts');
  const mine = active.body.data.find((a: any) => a.alert_rule_id === r.id);
  t.same(Object.keys(mine).sort(), ['alert_rule_id', 'current_value', 'last_evaluated_at', 'metric', 'name', 'operator', 'project_id', 'since', 'threshold_value', 'window_duration']);
  t.match(mine, { name: 'function errors', project_id: c.agentId, metric: 'function_errors', operator: '>=', threshold_value: 2, window_duration: '5m', current_value: 2 });
  t.equal((await api('GET', `/v1/alerts?project_id=${c.agentId}&metric=call_volume`)).body.data.length, 0, 'filters');

  // A key issued with a project_id lists only its project's active alerts: not the account-wide one, not another project's.
  const other = (await c.api('POST', '/v1/agents', { name: 'Quiet desk', description: 'x' })).body.agentId;
  const boundTo = async (project: string) =>
    client(p.edge, { 'x-api-key': (await admin(p)('POST', '/keys', { account_id: c.accountId, scope: 'alerts', project_id: project })).body.key });
  const activeFor = async (project: string, q = '') => (await (await boundTo(project))('GET', `/v1/alerts${q}`)).body.data.map((a: any) => a.alert_rule_id);
  t.same(await activeFor(c.agentId), [r.id], "a key bound to the rule's project: its rule, not the account-wide one");
  t.same(await activeFor(other), [], 'a key bound to another project: none');
  t.same(await activeFor(other, `?project_id=${c.agentId}`), [], 'not even when it asks for that project');

  // The errors stop: more turns, none failing, leave the count at 2; raised above it, the rule is back within.
  for (const m of ['hello', 'hello']) await c.chat('respond', { conversation_id: id, message: m });
  const back = await api('PATCH', `/v1/alert-rules/${r.id}`, { threshold_value: 3 });
  t.equal(back.body.current_state, 'ok', 'PATCH re-evaluates at once');
  t.equal(back.body.current_value, 2);
  t.equal((await api('GET', `/v1/alerts?metric=function_errors&project_id=${c.agentId}`)).body.data.length, 0, 'no longer active');

  const bodies = () => receiver.received.map((x) => JSON.parse(x.body)).filter((b) => b.alert?.id === r.id);
  const got = await eventually(async () => (bodies().length >= 2 ? bodies() : undefined), 20_000, 'both webhooks');
  t.same(got.map((b) => b.event_type), ['alerts.triggered', 'alerts.resolved']);
  t.match(got[0].alert, { id: r.id, name: 'function errors', project_id: c.agentId, metric: 'function_errors', operator: '>=', threshold_value: 2, current_value: 2 });
  t.ok(['ok', 'no_data'].includes(got[0].alert.previous_state), `previous_state ${got[0].alert.previous_state}: the state before it fired`);
  t.ok(Date.parse(got[0].alert.triggered_at) > 0, 'triggered_at');
  t.match(got[1].alert, { id: r.id, threshold_value: 3, current_value: 2, previous_state: 'alert' });
  t.ok(Date.parse(got[1].alert.resolved_at) > 0, 'resolved_at');
  const ids = receiver.received.filter((x) => JSON.parse(x.body).alert?.id === r.id).map((x) => x.headers['x-service-event-id']);
  t.equal(new Set(ids).size, 2, 'one event id per move');

  // A firing rule disabled keeps its state, but is no active alert; enabled again, it is (evaluated at once).
  const listed = async () => (await api('GET', '/v1/alerts')).body.data.some((a: any) => a.alert_rule_id === wide.id);
  t.ok(await listed(), 'the account-wide rule is active');
  const off = await api('PATCH', `/v1/alert-rules/${wide.id}`, { enabled: false });
  t.match(off.body, { enabled: false, current_state: 'alert' }, 'disabled, it keeps its last state');
  t.notOk(await listed(), 'and is not listed as an active alert');
  t.equal((await api('GET', '/v1/alert-rules?state=alert&enabled=false')).body.data.length, 1, 'the rules list still shows its state');
  t.match((await api('PATCH', `/v1/alert-rules/${wide.id}`, { enabled: true })).body, { enabled: true, current_state: 'alert' });
  t.ok(await listed(), 'enabled again, it is active again');
  for (const x of [r, wide]) await api('DELETE', `/v1/alert-rules/${x.id}`);
});

t.test('call_volume and the latency percentiles', async (t) => {
  const volume = await rule({ metric: 'call_volume', threshold_value: 2 });
  const p50 = await rule({ metric: 'turn_latency_p50', threshold_value: 0 });
  const p95 = await rule({ metric: 'turn_latency_p95', operator: '<', threshold_value: 0 });
  for (let i = 0; i < 2; i++) {
    const id = (await c.chat('create', {})).body.conversation_id;
    await c.chat('respond', { conversation_id: id, message: 'hello' });
  }
  const v = await eventually(async () => {
    const x = await stateOf(volume.id);
    return x.current_state === 'alert' && x.current_value >= 3 ? x : undefined;
  }, 30_000, 'call_volume');
  t.ok(v.current_value >= 3, `conversations in the window (${v.current_value}: these two and the earlier test's)`);
  const fast = await untilState(p50.id, 'alert', 'p50 >= 0');
  t.ok(Number.isInteger(fast.current_value) && fast.current_value > 0, `p50 ${fast.current_value} ms`);
  const never = await eventually(async () => {
    const x = await stateOf(p95.id);
    return x.current_value !== null ? x : undefined;
  }, 30_000, 'p95 read');
  t.equal(never.current_state, 'ok', 'p95 < 0 never breaches');
  t.ok(never.current_value >= fast.current_value, 'p95 at least p50');
  for (const x of [volume, p50, p95]) await api('DELETE', `/v1/alert-rules/${x.id}`);
});

t.test('api_errors from a real 5xx answered by the edge', async (t) => {
  const r = await rule({ metric: 'api_errors', threshold_value: 1 });
  const id = (await c.chat('create', {})).body.conversation_id;
  const slow = await c.chat('respond', { conversation_id: id, message: 'spin' });
  t.equal(slow.status, 503, 'the turn outlived the wait for it');
  const fired = await untilState(r.id, 'alert', 'api_errors to fire');
  t.ok(fired.current_value >= 1);
  await api('DELETE', `/v1/alert-rules/${r.id}`);
});

t.test("api_errors counts every family's 5xx for the project its credentials name: the Conversations API's too", async (t) => {
  const reporting = await chatProject(p, { name: 'Reporting Co' });
  const alertsKey = (await admin(p)('POST', '/keys', { account_id: reporting.accountId, scope: 'alerts' })).body.key;
  const alerts = client(p.edge, { 'x-api-key': alertsKey });
  const r = (await alerts('POST', '/v1/alert-rules', { name: 'reads', metric: 'api_errors', operator: '>=', threshold_value: 2, window_duration: '5m', project_id: reporting.agentId })).body;
  const key = (await admin(p)('POST', '/keys', { account_id: reporting.accountId, scope: 'conversations', project_id: reporting.agentId })).body.key;
  const from = new Date(Date.now() - 3_600_000).toISOString();
  const to = new Date().toISOString();
  for (let i = 0; i < 2; i++) {
    const reserved = await client(p.edge, { 'x-api-key': key })('GET', `/v1/${reporting.accountId}/${reporting.agentId}/conversations/concurrency?start_time=${from}&end_time=${to}&slice_by=language`);
    t.equal(reserved.status, 501, 'a reserved slice_by is a 5xx the edge answers (contract 7.3)');
  }
  const fired = await eventually(async () => {
    const x = (await alerts('GET', `/v1/alert-rules/${r.id}`)).body;
    return x.current_state === 'alert' ? x : undefined;
  }, 30_000, 'api_errors to fire');
  t.equal(fired.current_value, 2, 'both counted');
});
