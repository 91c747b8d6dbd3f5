/**
 * `call_crashes` driven by a real failure of the platform's own: an outbound call placed while no media gateway
 * runs (a platform started without the `media` role) fails with reason `error`, its `call.failed` journal event
 * says `crashed`, the metrics projection counts it, and a rule on `call_crashes` fires; a busy or unanswered
 * call would not count (the far end's doing, `test/alerts.projector.test.ts`).
 */
import t from 'tap';
import { platformFor, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';
import { client, http } from './helpers/http.js';
import { chatProject } from './helpers/chat.js';
import { eventually } from './helpers/eventually.js';

let p: Platform;
t.before(async () => {
  p = await platformFor(t, {
    roles: ['edge', 'worker'],
    env: { ALERTS_EVAL_INTERVAL_MS: '300', PROJECTION_POLL_MS: '100', OUTBOUND_RING_TIMEOUT_MS: '1500' },
  });
});

t.test('an outbound call that no media gateway takes is a crash, and a call_crashes rule fires', async (t) => {
  const c = await chatProject(p, { name: 'Crashing Co' });
  const trunk = await c.api('POST', `/v1/agents/${c.agentId}/telephony/connectors`, { name: 'Trunk', host: '198.51.100.7', port: 5060, transport: 'udp' });
  t.equal(trunk.status, 201);
  const connector = await admin(p)('POST', '/connectors', { account_id: c.accountId, project_id: c.agentId, kind: 'outbound', telephony_connector_id: trunk.body.id, from_number: '+14155550100' });
  t.equal(connector.status, 201);
  const key = await admin(p)('POST', '/keys', { account_id: c.accountId, scope: 'alerts' });
  const api = client(p.edge, { 'x-api-key': key.body.key });
  const rule = await api('POST', '/v1/alert-rules', { name: 'crashes', metric: 'call_crashes', operator: '>=', threshold_value: 1, window_duration: '5m', project_id: c.agentId });
  t.equal(rule.status, 201);

  const placed = await http(p.edge, 'POST', '/v1/outbound-calling', { body: { to_number: '+14155550123' }, headers: { 'x-service-auth-token': connector.body.token } });
  t.equal(placed.status, 200);
  const sid = placed.body.call_sid;
  const failed = await eventually(async () => {
    const s = await http(p.edge, 'GET', `/v1/outbound-calling/${sid}/status`, { headers: { 'x-service-auth-token': connector.body.token } });
    return s.body.status === 'failure' ? s.body : undefined;
  }, 30_000, 'the call to fail');
  t.match(failed, { status: 'failure' }, 'the call failed');

  const fired = await eventually(async () => {
    const r = (await api('GET', `/v1/alert-rules/${rule.body.id}`)).body;
    return r.current_state === 'alert' ? r : undefined;
  }, 30_000, 'the call_crashes rule to fire');
  t.equal(fired.current_value, 1, 'one crash in the window');
});
