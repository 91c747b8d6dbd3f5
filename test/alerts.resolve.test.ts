/**
 * A rule resolves because the errors stopped: with short metric buckets (`METRICS_BUCKET_MS`, so a `5m` window
 * spans 5 short buckets and reads 6), chat turns whose function throws make a `function_errors` rule fire; then only turns
 * that succeed follow, the errors leave the window, the rule is back to `ok`, and a real receiver gets
 * `alerts.triggered` then `alerts.resolved`, each verified with its own event id.
 */
import t from 'tap';
import { startPlatform, removeDir, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';
import { client } from './helpers/http.js';
import { chatProject } from './helpers/chat.js';
import { startReceiver, type Receiver } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';

const BUCKET_MS = 400;
let p: Platform;
let receiver: Receiver;
t.before(async () => {
  p = await startPlatform({
    env: { METRICS_BUCKET_MS: String(BUCKET_MS), ALERTS_EVAL_INTERVAL_MS: '200', PROJECTION_POLL_MS: '50', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
  });
  receiver = await startReceiver();
});
t.teardown(async () => {
  await receiver.close();
  await p.stop();
  removeDir(p.dataDir);
});

t.test('errors stop, the window empties of them, the rule resolves', async (t) => {
  const c = await chatProject(p, {
    name: 'Recovering Co',
    functions: { turn: `function turn(conv, message) { if (message === 'explode') throw new Error('boom'); return 'fine'; }` },
  });
  const key = await admin(p)('POST', '/keys', { account_id: c.accountId, scope: 'alerts' });
  const api = client(p.edge, { 'x-api-key': key.body.key });
  t.equal((await api('POST', '/v1/webhook-endpoints', { name: 'ops', url: receiver.url, event_types: ['alerts.triggered', 'alerts.resolved'] })).status, 201);
  const rule = (await api('POST', '/v1/alert-rules', { name: 'errors', metric: 'function_errors', operator: '>=', threshold_value: 1, window_duration: '5m', project_id: c.agentId })).body;

  const id = (await c.chat('create', {})).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: id, message: 'explode' })).status, 200);
  await eventually(async () => ((await api('GET', `/v1/alert-rules/${rule.id}`)).body.current_state === 'alert' ? true : undefined), 20_000, 'the rule to fire');

  // Only good turns from now on: the window keeps data (so the rule reads `ok`, not `no_data`) and loses the error.
  const back = await eventually(async () => {
    await c.chat('respond', { conversation_id: id, message: 'hello' });
    const r = (await api('GET', `/v1/alert-rules/${rule.id}`)).body;
    return r.current_state === 'ok' ? r : undefined;
  }, 30_000, 'the rule to be back within');
  t.equal(back.current_value, 0, 'no function errors left in the window');

  const bodies = await eventually(async () => {
    const got = receiver.received.map((x) => ({ body: JSON.parse(x.body), id: x.headers['x-service-event-id'] })).filter((x) => x.body.alert?.id === rule.id);
    return got.length >= 2 ? got : undefined;
  }, 20_000, 'both webhooks');
  t.same(bodies.map((b) => b.body.event_type), ['alerts.triggered', 'alerts.resolved']);
  t.match(bodies[1].body.alert, { id: rule.id, current_value: 0, previous_state: 'alert' });
  t.not(bodies[0].id, bodies[1].id, 'one event id per move');
});
