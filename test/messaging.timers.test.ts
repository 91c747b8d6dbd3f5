import t from 'tap';
import { eventually } from './helpers/eventually.js';
import { http } from './helpers/http.js';
import { connect, desk, handshakeStatus, is, T, messagingProject, type MessagingProject } from './helpers/messaging.js';
import { platformFor, type Platform } from './helpers/platform.js';

// Short idle and handoff times, and low rate limits, on a platform of their own.
let p: Platform;
let m: MessagingProject;

t.before(async () => {
  // Sessions are passivated quickly too: their timers and flushing must survive it.
  p = await platformFor(t, { env: { SESSION_IDLE_MS: '2500', HANDOFF_TIMEOUT_MS: '1000', MESSAGING_HTTP_RATE: '30', MESSAGING_WS_RATE: '3', PASSIVATE_AFTER_MS: '200' } });
  m = await messagingProject(p);
});

t.test('an idle session ends as abandoned and cannot be resumed', async (t) => {
  const { sessionId, accessToken } = await m.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  await c.waitFor(is('EVENT_BATCH'));
  const end = await c.waitFor(is('SESSION_END'), 'session end');
  t.match(end, { payload: { reason: 'REASON_USER_ABANDONED' }, sequence: 2 });
  await c.closed;
  t.match(await handshakeStatus(p.socket, { session_id: sessionId, access_token: accessToken }), { status: 404, body: { error: 'session not found' } });
});

t.test('activity keeps a session alive past the idle time', async (t) => {
  const { sessionId, accessToken } = await m.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  await c.waitFor(is('EVENT_BATCH'));
  // Heartbeats every 0.8 s for 4 s (longer than the 2.5 s idle time).
  for (let i = 0; i < 5; i++) {
    c.send(T('HEARTBEAT'));
    await new Promise((r) => setTimeout(r, 800));
  }
  t.notOk(c.flat().some(is('SESSION_END')), 'still open while active');
  t.equal((await c.waitFor(is('SESSION_END'), 'idle end')).payload.reason, 'REASON_USER_ABANDONED', 'ends once activity stops');
});

t.test('a server-managed handoff nobody accepts times out', async (t) => {
  const h = await messagingProject(p, { name: 'Slow Desk Co' });
  const key = await h.liveAgentKey();
  const { sessionId, accessToken } = await h.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  await c.waitFor(is('EVENT_BATCH'));
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'));
  c.send(T('USER_MESSAGE'), { text: 'Can I talk to a human?' });
  await c.waitFor(is('HANDOFF_QUEUE_STATUS'));
  t.equal((await desk(p, key)('GET', '/sessions')).body.data.length, 1);
  await c.waitFor(is('HANDOFF_TIMEOUT'), 'timeout');
  t.equal((await c.waitFor(is('SESSION_END'))).payload.reason, 'REASON_NATURAL_END');
  t.equal((await desk(p, key)('POST', `/sessions/${sessionId}/accept`, {})).status, 409, 'too late to accept');
});

t.test('HTTP rate limit: 429 with Retry-After', async (t) => {
  const post = () => http(p.socket, 'POST', '/api/v1/access-token', { body: {}, headers: { 'X-Token': m.connectorToken, 'X-Host': 'example.com' } });
  const statuses: number[] = [];
  let limited;
  for (let i = 0; i < 40 && !limited; i++) {
    const r = await post();
    statuses.push(r.status);
    if (r.status === 429) limited = r;
  }
  t.ok(limited, `limited after ${statuses.length} requests`);
  t.match(Number(limited!.headers.get('retry-after')), Number);
  t.ok(Number(limited!.headers.get('retry-after')) >= 1);
  t.equal(limited!.body.error, 'Rate limit exceeded');
  // Another connector's requests are not limited by this one's.
  const other = await messagingProject(p, { name: 'Other Co' });
  t.equal((await http(p.socket, 'POST', '/api/v1/access-token', { body: {}, headers: { 'X-Token': other.connectorToken, 'X-Host': 'example.com' } })).status, 200);
});

t.test('socket rate limit: excess events are dropped with a warning', async (t) => {
  const other = await messagingProject(p, { name: 'Chatty Co' });
  const { sessionId, accessToken } = await other.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  await c.waitFor(is('EVENT_BATCH'));
  for (let i = 0; i < 20; i++) c.send(T('HEARTBEAT'), {}, { client_event_id: `hb-${i}` });
  const warning = await c.waitFor(is('SYSTEM_MESSAGE'), 'warning');
  t.match(warning, { sequence: null, payload: { level: 'SYSTEM_MESSAGE_LEVEL_WARNING' }, metadata: { custom: { client_event_id: String } } });
  await eventually(async () => c.flat().filter((e) => is('HEARTBEAT')(e) || is('SYSTEM_MESSAGE')(e)).length === 20, 10_000, 'the heartbeats and the warning', 50);
  const echoes = c.flat().filter(is('HEARTBEAT')).length;
  t.ok(echoes < 20 && echoes > 0, `${echoes} of 20 accepted, the rest dropped`);
  t.equal(c.ws.readyState, c.ws.OPEN, 'the socket stays open');
  await c.close();
});

t.test('sessions with sockets open stay passivated: counting connections asks nothing of them', async (t) => {
  // Its own platform: a long idle time, quick passivation, and a short connection TTL (gateway heartbeats
  // every 0.4 s), so that anything asked of the sessions per heartbeat would keep their actors live.
  const q = await platformFor(t, { env: { PASSIVATE_AFTER_MS: '200', MESSAGING_CONNECTION_TTL_MS: '1200' } });
  const quiet = await messagingProject(q, { name: 'Quiet Co' });
  const open = [];
  for (let i = 0; i < 3; i++) {
    const { sessionId, accessToken } = await quiet.session();
    const c = await connect(q.socket, { session_id: sessionId, access_token: accessToken });
    await c.waitFor(is('EVENT_BATCH'));
    open.push(c);
  }
  const live = async (): Promise<number> => (await http(q.edge, 'GET', '/admin/v1/runtime', { headers: { authorization: `Bearer ${q.operatorToken}` } })).body.workers[0].liveActors;
  t.ok(await eventually(async () => (await live()) === 0, 10_000, 'every actor to passivate', 100), 'every actor passivates while the sockets sit idle');
  const samples: number[] = [];
  for (let i = 0; i < 12; i++) {
    await new Promise((r) => setTimeout(r, 100));
    samples.push(await live());
  }
  t.same(samples, Array(12).fill(0), 'and none wakes up over three heartbeats');
  t.ok(open.every((c) => c.ws.readyState === c.ws.OPEN), 'the sockets stay open');
  for (const c of open) await c.close();
});

t.test('a passivated session comes back with its journal, and publishes what it does next', async (t) => {
  const sleepy = await messagingProject(p, { name: 'Sleepy Co' });
  const { sessionId, accessToken } = await sleepy.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  await c.waitFor(is('EVENT_BATCH'));
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'));
  // Idle past PASSIVATE_AFTER_MS (the session's actor leaves memory), within the idle time.
  await new Promise((r) => setTimeout(r, 800));
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'When are you open?' });
  const types = [];
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply', from);
  for (const e of c.flat().slice(from)) types.push(e.type);
  t.same(types, [T('USER_MESSAGE'), T('SERVICE_AGENT_THINKING'), T('SERVICE_AGENT_MESSAGE')]);
  t.same(c.flat().filter((e) => e.sequence !== null).map((e) => e.sequence), [1, 2, 3, 4, 5, 6], 'sequences go on from the journal');
  await c.close();
});
