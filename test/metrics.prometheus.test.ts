/**
 * Prometheus metrics (`platform/metrics.ts`) scraped from a started platform: `GET /metrics` on the edge port
 * and on `METRICS_PORT`; HTTP answers by family and status, the chat turn latency histogram, live actors per
 * kind, the webhook and sandbox counters, messaging socket closes by code; no conversation or account id in any label.
 */
import t from 'tap';
import { platformFor, type Platform } from './helpers/platform.js';
import { chatProject } from './helpers/chat.js';
import { connect, is, messagingProject } from './helpers/messaging.js';
import { alertsTenant, startReceiver } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';

let p: Platform;
t.before(async () => {
  p = await platformFor(t, { env: { METRICS_PORT: '0', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
});

const value = (text: string, series: string): number | null => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : null;
};

t.test('the edge and METRICS_PORT serve the exposition after real traffic', async (t) => {
  const c = await chatProject(p, { name: 'Metered Co', functions: { turn: 'function turn(conv, m) { return "ok"; }' } });
  const id = (await c.chat('create', {})).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hello' })).status, 200);
  const res = await eventually(async () => {
    const r = await fetch(new URL('/metrics', p.edge));
    const text = await r.text();
    return (value(text, 'switchboard_turn_latency_seconds_count{channel="chat"}') ?? 0) >= 1 ? { r, text } : undefined;
  }, 10_000, 'the turn to be counted');
  t.equal(res.r.status, 200);
  t.match(res.r.headers.get('content-type'), /^text\/plain/);
  const text = res.text;
  t.ok((value(text, 'switchboard_http_responses_total{family="chat",status="200"}') ?? 0) >= 2, 'chat answers by family and status');
  t.ok((value(text, 'switchboard_http_responses_total{family="agents",status="201"}') ?? 0) >= 1, 'agents answers');
  t.ok((value(text, 'switchboard_live_actors{kind="conversation"}') ?? 0) >= 1, 'live conversation actors');
  t.match(text, '# TYPE switchboard_webhook_attempts_total counter');
  t.match(text, '# TYPE switchboard_actor_events_expired_total counter', 'events shed by the actors\' mailboxes');
  // Every hosted kind has a sample from the start, 0 included, for both per-kind series.
  t.equal(value(text, 'switchboard_actor_events_expired_total{kind="session"}'), 0, 'no session events shed: a sample of 0');
  t.equal(value(text, 'switchboard_live_actors{kind="alert-rule"}'), 0, 'no live alert rule: a sample of 0');
  t.ok((value(text, 'switchboard_sandbox_calls_total{outcome="ok"}') ?? 0) >= 1, 'sandbox calls by outcome');
  t.equal(value(text, 'switchboard_messaging_connections{what="sockets"}'), 0, 'messaging sockets (none open)');
  t.equal(value(text, 'switchboard_messaging_connections{what="sessions"}'), 0, 'messaging sessions with a socket');
  t.notOk(text.includes(id), 'no conversation id');
  t.notOk(text.includes(c.accountId), 'no account id');
  t.notOk(text.includes(c.agentId), 'no project id');

  const port = /metrics http:\/\/[0-9.]+:(\d+)\/metrics/.exec(p.stdout())?.[1];
  t.ok(port, 'the process says where METRICS_PORT serves');
  const own = await fetch(`http://127.0.0.1:${port}/metrics`);
  t.equal(own.status, 200);
  t.match(await own.text(), 'switchboard_live_actors');
  t.equal((await fetch(`http://127.0.0.1:${port}/other`)).status, 404);
});

t.test('webhook attempts are counted by outcome', async (t) => {
  const receiver = await startReceiver({ script: [{ status: 503 }], fallback: { status: 204 } });
  t.teardown(() => receiver.close());
  const { api } = await alertsTenant(p, 'Hooked Co');
  const created = await api('POST', '/v1/webhook-endpoints', { name: 'ops', url: receiver.url, event_types: ['alerts.triggered'] });
  t.equal(created.status, 201);
  t.equal((await api('POST', `/v1/webhook-endpoints/${created.body.id}/test`)).status, 202);
  // The first attempt is answered 503 (its retry waits a minute on the default schedule).
  await receiver.waitFor(1, 20_000);
  const text = await eventually(async () => {
    const body = await (await fetch(new URL('/metrics', p.edge))).text();
    return (value(body, 'switchboard_webhook_attempts_total{outcome="http_5xx"}') ?? 0) >= 1 ? body : undefined;
  }, 20_000, 'the failed attempt to be counted');
  t.ok((value(text, 'switchboard_webhook_attempts_total{outcome="http_5xx"}') ?? 0) >= 1, 'a 5xx answer');
});

t.test('messaging socket closes are counted by close code, and apart when within a second of the open', async (t) => {
  const m = await messagingProject(p, { name: 'Socket Co' });
  const scrape = async () => (await fetch(new URL('/metrics', p.edge))).text();
  const count = (text: string, code: string, early: boolean) => value(text, `switchboard_messaging_socket_closes_total{code="${code}",early="${early}"}`) ?? 0;
  const open = async () => {
    const { sessionId, accessToken } = await m.session();
    const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
    await c.waitFor(is('EVENT_BATCH'), 'the replay');
    return c;
  };
  const before = await scrape();
  // Dropped at once, without a close frame: the server sees 1006 (abnormal), early.
  const dropped = await open();
  dropped.ws.terminate();
  // Closed by the client with 1000, more than a second after its open.
  const kept = await open();
  await new Promise((r) => setTimeout(r, 1200));
  kept.ws.close(1000);
  await kept.closed;
  const after = await eventually(async () => {
    const text = await scrape();
    return count(text, '1006', true) > count(before, '1006', true) && count(text, '1000', false) > count(before, '1000', false) ? text : undefined;
  }, 10_000, 'both closes to be counted');
  t.equal(count(after, '1006', true) - count(before, '1006', true), 1, 'the dropped socket: 1006, early');
  t.equal(count(after, '1000', false) - count(before, '1000', false), 1, 'the closed socket: 1000, not early');
});
