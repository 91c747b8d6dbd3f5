import t from 'tap';
import { openStore, type Store } from '../store/mod.js';
import { conversationRecords } from '../actors/conversation/record.js';
import { eventually } from './actors.behaviour.js';
import { http } from './helpers/http.js';
import { connect, handshakeStatus, is, T, type Ev, type MessagingProject, messagingProject } from './helpers/messaging.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';

let p: Platform;
let m: MessagingProject;
let store: Store;

t.before(async () => {
  p = await startPlatform();
  m = await messagingProject(p);
  store = await openStore({ dataDir: p.dataDir });
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const envelope = (t: { match: (...a: any[]) => void; ok: (...a: any[]) => void; type: (...a: any[]) => void }, e: Ev) => {
  t.match(e.id, UUID, `${e.type} id is a UUID`);
  t.ok(!Number.isNaN(Date.parse(e.timestamp)), `${e.type} timestamp is ISO 8601`);
  t.type(e.metadata, 'object', `${e.type} has metadata`);
};

t.test('the whole sequence: token, session, replay, join, user message, agent reply, end', async (t) => {
  const tok = await http(p.socket, 'POST', '/api/v1/access-token', { body: {}, headers: { 'X-Token': m.connectorToken, 'X-Host': 'example.com' } });
  t.equal(tok.status, 200, tok.text);
  t.match(tok.body, { access_token: String, expires_in: 86400, token_type: 'Bearer' });
  const s = await http(p.socket, 'POST', '/api/v1/sessions', { body: { platform: 'ios-web' }, headers: { Authorization: `Bearer ${tok.body.access_token}`, 'User-Agent': 'tap' } });
  t.equal(s.status, 200, s.text);
  const sessionId = s.body.session_id;
  t.match(sessionId, /^ses_/);

  const c = await connect(p.socket, { session_id: sessionId, access_token: tok.body.access_token });
  const batch = await c.waitFor(is('EVENT_BATCH'), 'batch');
  t.equal(c.events[0].type, T('EVENT_BATCH'), 'the first frame is the replay');
  envelope(t, batch);
  t.equal(batch.sequence, null);
  t.equal(batch.payload.events.length, 1);
  const start = batch.payload.events[0];
  t.match(start, { type: T('SESSION_START'), sequence: 1, payload: { capabilities: { streaming: false, max_message_size_bytes: 131072, max_reconnect_attempts: 5, heartbeat_interval_seconds: 30 } } });
  envelope(t, start);

  c.send(T('REQUEST_SERVICE_AGENT_JOIN'), {}, { client_event_id: 'j1' });
  const joinEcho = await c.waitFor(is('REQUEST_SERVICE_AGENT_JOIN'), 'join echo');
  t.match(joinEcho, { sequence: 2, metadata: { custom: { client_event_id: 'j1' } } });
  const joined = await c.waitFor(is('SERVICE_AGENT_JOINED'), 'joined');
  t.match(joined, { sequence: 3, payload: { agent_name: 'Front Desk', agent_avatar_url: String } });
  const thinking = await c.waitFor(is('SERVICE_AGENT_THINKING'), 'thinking');
  t.equal(thinking.sequence, null, 'thinking is transient');
  const greeting = await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  t.match(greeting, { sequence: 4, payload: { message_id: String, text: 'Hello, welcome to Acme Dental!', attachments: [], response_suggestions: [] } });
  const order = c.flat().map((e) => e.type);
  t.same(order.slice(1), [T('SESSION_START'), T('REQUEST_SERVICE_AGENT_JOIN'), T('SERVICE_AGENT_JOINED'), T('SERVICE_AGENT_THINKING'), T('SERVICE_AGENT_MESSAGE')]);

  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'When are you open on Monday?' }, { client_event_id: 'u1', local_id: 'draft-1' });
  const echo = await c.waitFor(is('USER_MESSAGE'), 'echo', from);
  t.match(echo, { sequence: 5, payload: { text: 'When are you open on Monday?', message_id: String }, metadata: { custom: { client_event_id: 'u1', local_id: 'draft-1' } } });
  const reply = await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply', from);
  t.match(reply, { sequence: 6, payload: { text: 'We are open from 9am to 5pm, Monday to Friday.' }, metadata: { custom: { client_event_id: 'u1' } } });
  t.not(reply.payload.message_id, greeting.payload.message_id);

  c.send(T('HEARTBEAT'));
  await c.waitFor(is('HEARTBEAT'), 'heartbeat echo');
  c.send(T('USER_TYPING'), { state: 'TYPING_STATE_STARTED' });

  c.send(T('USER_END_SESSION'), {}, { client_event_id: 'end' });
  await c.waitFor(is('USER_END_SESSION'), 'end echo');
  const end = await c.waitFor(is('SESSION_END'), 'session end');
  t.match(end, { payload: { reason: 'REASON_USER_END' }, sequence: Number });
  t.equal((await c.closed).code, 1000, 'the socket closes after SESSION_END');

  // The conversation record: channel WEBCHAT, both turns, ended.
  const records = conversationRecords(store);
  const record = await eventually(async () => {
    const r = await records.get(sessionId);
    return r && r.in_progress === false ? r : null;
  }, 10_000, 50);
  t.equal(record!.channel, 'WEBCHAT');
  t.equal(record!.turns.length, 2);
  t.equal(record!.turns[1].user_input, 'When are you open on Monday?');

  // An ended session is unknown to the handshake.
  t.equal((await handshakeStatus(p.socket, { session_id: sessionId, access_token: tok.body.access_token })).status, 404);
});
