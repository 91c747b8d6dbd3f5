/**
 * OpenTelemetry traces (platform/telemetry.ts): a chat turn is one trace from the edge's request span through
 * the actor ask (W3C trace context in the message headers) to the actor's handling span and the sandbox and
 * responder calls it makes, in one process and across processes over NATS; an incoming `traceparent` is
 * continued; request log lines carry `trace_id`; and with no OTEL variables nothing is exported.
 */
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { tracingConfigured } from '../platform/telemetry.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { startCluster } from './helpers/cluster.js';
import { http } from './helpers/http.js';
import { messagingProject } from './helpers/messaging.js';
import { natsAvailable } from './helpers/nats.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './helpers/otlp.js';
import { platformFor, removeDir, startPlatform, type Platform } from './helpers/platform.js';

const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

const TURN = `function turn(conv, m) { conv.state.n = (conv.state.n ?? 0) + 1; if (m === 'count') return 'n=' + conv.state.n; }`;
const SERVER = 2;
const CLIENT = 3;

/** Every OTEL variable unset (the test runner's own environment must not switch tracing on or off). */
const NO_OTEL = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('OTEL_')).map((k) => [k, undefined]));

const otelEnv = (r: OtlpReceiver) => ({
  ...NO_OTEL,
  OTEL_EXPORTER_OTLP_ENDPOINT: r.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_BSP_SCHEDULE_DELAY: '100',
  OTEL_SERVICE_NAME: 'switchboard-test',
});

async function waitFor<T>(what: string, f: () => T | undefined, ms = 15_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A Chat API respond call with extra headers (a `traceparent`). */
const respond = (p: Platform, c: ChatProject, body: unknown, headers: Record<string, string> = {}) =>
  http(p.edge, 'POST', `/v1/${c.accountId}/${c.agentId}/chat/respond`, { body, headers: { 'X-API-KEY': c.chatKey, 'X-TOKEN': c.token, ...headers } });

/**
 * The spans of one request's trace, found from its edge span: the ask under it, the actor's handling span
 * under the ask, and the calls the handling made. Waits until all of them have been exported.
 */
async function chain(r: OtlpReceiver, traceId: string, route: RegExp, calls: string[]) {
  return waitFor(`the spans of trace ${traceId}`, () => {
    const spans = r.spans.filter((s) => s.traceId === traceId);
    const edge = spans.find((s) => s.kind === SERVER && route.test(String(s.attributes['http.route'])));
    const ask = spans.find((s) => s.name === 'actor.ask' && s.parentSpanId === edge?.spanId);
    const handle = spans.find((s) => s.name === 'actor.handle' && s.parentSpanId === ask?.spanId);
    const children = calls.map((name) => spans.find((s) => s.name === name && s.parentSpanId === handle?.spanId));
    if (!edge || !ask || !handle || children.some((c) => !c)) return undefined;
    return { edge, ask, handle, calls: Object.fromEntries(calls.map((n, i) => [n, children[i]!])) as Record<string, ReceivedSpan> };
  });
}

const traceparent = () => {
  const traceId = randomBytes(16).toString('hex');
  const parentId = randomBytes(8).toString('hex');
  return { traceId, parentId, header: `00-${traceId}-${parentId}-01` };
};

t.test('tracing is on only when the OTEL variables configure an exporter', async (t) => {
  t.equal(tracingConfigured({}), false);
  t.equal(tracingConfigured({ OTEL_SERVICE_NAME: 'x' }), false);
  t.equal(tracingConfigured({ OTEL_TRACES_EXPORTER: 'otlp' }), true);
  t.equal(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), true);
  t.equal(tracingConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }), true);
  t.equal(tracingConfigured({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), false);
  t.equal(tracingConfigured({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }), false);
});

t.test('embedded: one trace from the edge through the actor to the sandbox and the responder, and log lines carry its ids', async (t) => {
  const r = await startOtlpReceiver();
  t.teardown(() => r.close());
  const p = await platformFor(t, { env: { ...otelEnv(r), LOG_LEVEL: 'info', LOG_FORMAT: 'json' } });
  const c = await messagingProject(p, { functions: { turn: TURN } });

  const created = await c.chat('create', {});
  t.equal(created.status, 200, created.text);
  const id = created.body.conversation_id;
  const traceOf = (name: string) => r.spans.find((s) => s.name === name && s.attributes['conversation.id'] === id)?.traceId;
  const startTrace = await waitFor('the start ask', () => traceOf('actor.ask'));
  const start = await chain(r, startTrace, /chat\/create$/, ['responder.greet']);
  t.equal(start.edge.parentSpanId, '', 'a request without traceparent starts a trace');
  t.equal(start.edge.attributes['http.request.method'], 'POST');
  t.equal(start.edge.attributes['http.response.status_code'], 200);
  t.equal(start.edge.resource['service.name'], 'switchboard-test');
  t.equal(start.ask.kind, CLIENT);
  t.match(start.ask.attributes, { 'actor.kind': 'conversation', 'actor.id': id, 'conversation.id': id });
  t.equal(start.handle.kind, SERVER);
  t.match(start.handle.attributes, { 'actor.kind': 'conversation', 'actor.id': id, 'actor.event': 'START' });

  // An incoming traceparent is continued: the edge span is its child, and the turn's spans are in its trace.
  const tp = traceparent();
  const turned = await respond(p, c, { conversation_id: id, message: 'When do you open?' }, { traceparent: tp.header });
  t.equal(turned.status, 200, turned.text);
  const turn = await chain(r, tp.traceId, /chat\/respond$/, ['sandbox.invoke', 'responder.respond']);
  t.equal(turn.edge.parentSpanId, tp.parentId, 'the edge span continues the caller’s span');
  t.match(turn.calls['sandbox.invoke'].attributes, { 'function.name': 'turn', 'project.id': c.agentId, 'function.outcome': 'ok', 'conversation.id': id });
  t.match(turn.calls['responder.respond'].attributes, { 'conversation.id': id, 'responder.outcome': 'ok' });

  // The response line of that request carries the trace and the conversation.
  const lines = p.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  const completed = lines.find((l) => l.msg === 'request completed' && l.trace_id === tp.traceId);
  t.ok(completed, 'the request’s log line has its trace_id');
  t.equal(completed?.span_id, turn.edge.spanId, 'and the edge span’s id');
  t.equal(completed?.conversation_id, id, 'and the conversation’s id');

  // The socket gateway's session step: a span continuing the caller's traceparent, the session ask under it.
  const st = traceparent();
  const session = await http(p.socket, 'POST', '/api/v1/sessions', { body: {}, headers: { Authorization: `Bearer ${await c.accessToken()}`, traceparent: st.header } });
  t.equal(session.status, 200, session.text);
  const step = await waitFor('the session step spans', () => {
    const spans = r.spans.filter((s) => s.traceId === st.traceId);
    const http = spans.find((s) => s.name === 'POST /api/v1/sessions' && s.parentSpanId === st.parentId);
    const ask = spans.find((s) => s.name === 'actor.ask' && s.parentSpanId === http?.spanId);
    const handle = spans.find((s) => s.name === 'actor.handle' && s.parentSpanId === ask?.spanId);
    return http && ask && handle ? { http, ask, handle } : undefined;
  });
  t.equal(step.http.kind, SERVER);
  t.equal(step.http.attributes['http.response.status_code'], 200);
  t.match(step.handle.attributes, { 'actor.kind': 'session', 'actor.id': session.body.session_id, 'actor.event': 'CREATE' });
});

t.test('over NATS: the edge process and the worker process export spans of one linked trace', needsNats, async (t) => {
  const r = await startOtlpReceiver();
  t.teardown(() => r.close());
  const cluster = await startCluster({ workers: 1, env: otelEnv(r) as Record<string, string> });
  t.teardown(() => cluster.stop());
  const c = await chatProject(cluster.edge, { functions: { turn: TURN } });
  const created = await c.chat('create', {});
  t.equal(created.status, 200, created.text);
  const id = created.body.conversation_id;

  const tp = traceparent();
  const counted = await respond(cluster.edge, c, { conversation_id: id, message: 'count' }, { traceparent: tp.header });
  t.equal(counted.body.response, 'n=1', counted.text);
  const turn = await chain(r, tp.traceId, /chat\/respond$/, ['sandbox.invoke']);
  t.equal(turn.edge.parentSpanId, tp.parentId);
  t.equal(turn.edge.resource['switchboard.roles'], 'edge', 'the edge span comes from the edge process');
  t.equal(turn.ask.resource['switchboard.roles'], 'edge', 'so does the ask');
  t.equal(turn.handle.resource['switchboard.roles'], 'worker', 'the handling span comes from the worker, its parent from the message headers');
  t.equal(turn.calls['sandbox.invoke'].resource['switchboard.roles'], 'worker');
  t.match(turn.calls['sandbox.invoke'].attributes, { 'function.name': 'turn', 'function.outcome': 'ok' });
});

t.test('with no OTEL variables nothing is exported; OTEL_TRACES_EXPORTER=none turns an endpoint off', async (t) => {
  // The exporter's default endpoint is localhost:4318: listen there when it is free, so a default-configured
  // export would be seen.
  const atDefault = await startOtlpReceiver(4318).catch(() => null);
  const r = await startOtlpReceiver();
  t.teardown(async () => {
    await r.close();
    await atDefault?.close();
  });
  for (const env of [{ ...NO_OTEL }, { ...NO_OTEL, OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: r.url, OTEL_BSP_SCHEDULE_DELAY: '100' }]) {
    const p = await startPlatform({ env: { ...env, LOG_LEVEL: 'info', LOG_FORMAT: 'json' } });
    const c = await chatProject(p, { functions: { turn: TURN } });
    const created = await c.chat('create', {});
    const turned = await respond(p, c, { conversation_id: created.body.conversation_id, message: 'count' }, { traceparent: traceparent().header });
    t.equal(turned.body.response, 'n=1', turned.text);
    await new Promise((res) => setTimeout(res, 600));
    await p.stop();
    const lines = p.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    t.notOk(lines.some((l) => 'trace_id' in l), 'no log line carries a trace id');
    removeDir(p.dataDir);
  }
  t.equal(r.requests, 0, 'no export request reached the configured endpoint');
  if (atDefault) t.equal(atDefault.requests, 0, 'nor the default one');
});
