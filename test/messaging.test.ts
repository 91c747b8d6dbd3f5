import t from 'tap';
import type { Store } from '../store/mod.js';
import { conversationRecords } from '../actors/conversation/record.js';
import { sessionRecords } from '../actors/session/mod.js';
import { eventually } from './helpers/eventually.js';
import { http } from './helpers/http.js';
import { connect, desk, handshakeStatus, is, T, type Ev, type MessagingProject, messagingProject } from './helpers/messaging.js';
import { waitForProjections } from './helpers/projections.js';
import { removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';

let p: Platform;
let m: MessagingProject;
let store: Store;

t.before(async () => {
  ({ p, store } = await startPlatformWithStore({ env: { HANDOFF_QUEUE_STATUS_MS: '300' } }));
  m = await messagingProject(p);
});
t.teardown(async () => {
  await store.close();
  const errors = p.stdout().split('\n').filter((l) => /"level":(50|60)/.test(l));
  if (errors.length) t.comment(`platform errors:\n${errors.join('\n')}`);
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
    await waitForProjections(p);
    const r = await records.get(sessionId);
    return r && r.in_progress === false ? r : null;
  }, 10_000, "the session's ended record", 50);
  t.equal(record!.channel, 'WEBCHAT');
  t.equal(record!.turns.length, 2);
  t.equal(record!.turns[1].user_input, 'When are you open on Monday?');

  // An ended session is unknown to the handshake.
  t.equal((await handshakeStatus(p.socket, { session_id: sessionId, access_token: tok.body.access_token })).status, 404);
});

t.test('access token: every error row, and subdomains of the registered host', async (t) => {
  const post = (headers: Record<string, string>) => http(p.socket, 'POST', '/api/v1/access-token', { body: {}, headers });
  const errorOf = (r: { status: number; body: any }) => [r.status, r.body?.error];
  t.same(errorOf(await post({ 'X-Host': 'example.com' })), [401, 'Missing authentication headers'], 'no X-Token');
  t.same(errorOf(await post({ 'X-Token': m.connectorToken })), [401, 'Missing authentication headers'], 'no X-Host');
  t.same(errorOf(await post({ 'X-Token': 'sbc_con_AAAAAAAAAAAAAAAA_' + 'x'.repeat(32), 'X-Host': 'example.com' })), [401, 'Connector token does not exist']);
  t.same(errorOf(await post({ 'X-Token': 'nonsense', 'X-Host': 'example.com' })), [401, 'Connector token does not exist']);
  t.same(errorOf(await post({ 'X-Token': m.connectorToken, 'X-Host': 'evil.com' })), [401, 'Failed to validate connector']);
  t.same(errorOf(await post({ 'X-Token': m.connectorToken, 'X-Host': 'notexample.com' })), [401, 'Failed to validate connector'], 'a suffix that is not a subdomain');
  for (const host of ['.example.com', 'a..example.com', 'a b.example.com', 'https://.example.com/']) {
    t.same(errorOf(await post({ 'X-Token': m.connectorToken, 'X-Host': host })), [401, 'Failed to validate connector'], `${JSON.stringify(host)} names no subdomain`);
  }
  // A chat connector has no host domain.
  t.same(errorOf(await post({ 'X-Token': m.token, 'X-Host': 'example.com' })), [401, 'Connector missing host domain']);
  const r = await post({ 'X-Token': m.connectorToken, 'X-Host': 'https://deep.app.example.com/widget' });
  t.equal(r.status, 200, 'a subdomain (with scheme and path) matches');
  t.match((await post({ 'X-Token': m.connectorToken, 'X-Host': 'EXAMPLE.COM' })).status, 200, 'host matching ignores case');
  const pre = await http(p.socket, 'OPTIONS', '/api/v1/access-token', { headers: { origin: 'https://www.example.com', 'access-control-request-method': 'POST' } });
  t.equal(pre.status, 204, 'CORS preflight');
  t.match(pre.headers.get('access-control-allow-headers'), /X-Token/);
  t.equal(r.headers.get('access-control-allow-origin'), '*');
  const e = await post({});
  t.match(e.body, { success: false, error: 'Missing authentication headers', error_message: 'Missing authentication headers', error_code: String });
  // The body: an empty JSON object, or none; anything else is a malformed body (contract 7.4), after the credentials.
  const raw = (body: string | undefined, headers: Record<string, string> = {}) => http(p.socket, 'POST', '/api/v1/access-token', { raw: body, headers: { 'X-Token': m.connectorToken, 'X-Host': 'example.com', ...headers } });
  t.equal((await raw(undefined)).status, 200, 'no body, no Content-Type');
  t.equal((await raw('{}', { 'content-type': 'application/json' })).status, 200);
  for (const bad of ['bad', '[]', 'null', '{"a":']) t.same(errorOf(await raw(bad, { 'content-type': 'application/json' })), [400, 'Error parsing request'], `body ${bad}`);
  t.same(errorOf(await http(p.socket, 'POST', '/api/v1/access-token', { raw: 'bad', headers: { 'X-Host': 'example.com' } })), [401, 'Missing authentication headers'], 'credentials first');
});

t.test('sessions: every error row', async (t) => {
  const token = await m.accessToken();
  const post = (headers: Record<string, string>, raw?: string | Uint8Array<ArrayBuffer>) => http(p.socket, 'POST', '/api/v1/sessions', { raw, headers: { 'content-type': 'application/json', ...headers } });
  const errorOf = (r: { status: number; body: any }) => [r.status, r.body?.error];
  t.same(errorOf(await post({})), [400, 'Missing access token']);
  t.same(errorOf(await post({ Authorization: token })), [401, 'Missing authentication headers'], 'not in Bearer form');
  t.same(errorOf(await post({ Authorization: `Basic ${token}` })), [401, 'Missing authentication headers']);
  t.same(errorOf(await post({ Authorization: 'Bearer not.a.jwt' })), [401, 'Invalid access token'], 'malformed');
  const [h, b, sig] = token.split('.');
  const claims = JSON.parse(Buffer.from(b, 'base64url').toString());
  const forged = Buffer.from(JSON.stringify({ ...claims, account_id: 'acc_other' })).toString('base64url');
  t.same(errorOf(await post({ Authorization: `Bearer ${h}.${forged}.${sig}` })), [401, 'Invalid access token'], 'tampered');
  // An expired token, signed with the deployment's own key.
  const { SignJWT } = await import('jose');
  const secret = await store.collection<{ id: string; secret: string }>({ name: 'messaging_secrets' }).get('jwt');
  const expired = await new SignJWT({ ...claims, exp: Math.floor(Date.now() / 1000) - 60 }).setProtectedHeader({ alg: 'HS256' }).sign(Buffer.from(secret!.secret, 'base64url'));
  t.same(errorOf(await post({ Authorization: `Bearer ${expired}` })), [401, 'Invalid access token'], 'expired');
  t.same(errorOf(await post({ Authorization: `Bearer ${token}` }, '{not json')), [400, 'Error parsing request']);
  t.same(errorOf(await post({ Authorization: `Bearer ${token}` }, '[1,2]')), [400, 'Error parsing request'], 'not an object');
  const notUtf8 = Buffer.concat([Buffer.from('{"x":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
  t.same(errorOf(await post({ Authorization: `Bearer ${token}` }, notUtf8)), [400, 'Error parsing request'], 'a body that is not UTF-8');
  // Escaped, a lone surrogate is valid UTF-8 text, but it would be stored as U+FFFD: not what was sent.
  t.same(errorOf(await post({ Authorization: `Bearer ${token}` }, String.raw`{"platform":"web","x":"\ud800"}`)), [400, 'Error parsing request'], 'a lone surrogate escape');
  t.same(errorOf(await post({ Authorization: `Bearer ${token}` }, '{"platform":"web","x":1e309}')), [400, 'Error parsing request'], 'a number past a double (Infinity, stored as null)');
  // The table's message exactly (contract 7.4), what was wrong beside it.
  const fridge = await post({ Authorization: `Bearer ${token}` }, '{"platform":"fridge"}');
  t.same([fridge.status, fridge.body.error, fridge.body.error_message], [400, 'Error parsing request', 'Error parsing request'], 'unknown platform');
  t.match(fridge.body.error_detail, /^platform must be one of web, /);
  const yes = await post({ Authorization: `Bearer ${token}` }, '{"streaming_enabled":"yes"}');
  t.same([yes.status, yes.body.error_message, yes.body.error_detail], [400, 'Error parsing request', 'streaming_enabled must be a boolean'], 'streaming_enabled not a boolean');
  t.equal((await post({ Authorization: `Bearer ${token}` })).status, 200, 'the body may be omitted');
  for (const platform of ['web', 'ios', 'android', 'custom', 'ios-web', 'android-web']) {
    t.equal((await post({ Authorization: `Bearer ${token}` }, JSON.stringify({ platform }))).status, 200, `platform ${platform}`);
  }
});

t.test('handshake: every error row, and the connection limit', async (t) => {
  const { sessionId, accessToken } = await m.session();
  t.same(await handshakeStatus(p.socket, { access_token: accessToken }), { status: 400, body: { success: false, error: 'invalid connection parameters', error_code: 'INVALID_CONNECTION_PARAMETERS', error_message: 'invalid connection parameters', data: null } });
  t.equal((await handshakeStatus(p.socket, { session_id: sessionId })).status, 400);
  t.match(await handshakeStatus(p.socket, { session_id: sessionId, access_token: 'garbage' }), { status: 401, body: { error: 'authentication failed' } });
  t.match(await handshakeStatus(p.socket, { session_id: 'ses_unknown', access_token: accessToken }), { status: 404, body: { error: 'session not found' } });
  t.match(await handshakeStatus(p.socket, { session_id: 'not a valid id!', access_token: accessToken }), { status: 404 });
  // A token of another connector does not match the session.
  const other = await messagingProject(p, { name: 'Other Co' });
  t.match(await handshakeStatus(p.socket, { session_id: sessionId, access_token: await other.accessToken() }), { status: 401, body: { error: 'authentication failed' } });

  const open = [];
  for (let i = 0; i < 10; i++) open.push(await connect(p.socket, { session_id: sessionId, access_token: accessToken }));
  t.match(await handshakeStatus(p.socket, { session_id: sessionId, access_token: accessToken }), { status: 429, body: { error: 'connection limit exceeded for session' } }, 'the 11th is refused');
  const refused = await connect(p.socket, { session_id: sessionId, access_token: accessToken }).then(
    (c) => c.close().then(() => null),
    (err: { status?: number; headers?: Record<string, string> }) => err,
  );
  t.equal(refused?.status, 429, 'the 11th again');
  t.equal(refused?.headers?.['retry-after'], '5', 'the connection limit\'s 429 says when to retry (Retry-After: 5)');
  await open.pop()!.close();
  // The close deregisters the connection: a new one fits again.
  const again = await eventually(async () => connect(p.socket, { session_id: sessionId, access_token: accessToken }).catch(() => null), 10_000, 'a connection that fits again', 50);
  t.ok(again, 'a slot freed by a close is usable');
  open.push(again!);
  for (const c of open) await c.close();
});

t.test('event errors: SYSTEM_MESSAGE at level ERROR, custom echoed, the socket stays open', async (t) => {
  const { sessionId, accessToken } = await m.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  await c.waitFor(is('EVENT_BATCH'));
  const errorAfter = async (send: () => void) => {
    const from = c.flat().length;
    send();
    return c.waitFor((e) => e.type === T('SYSTEM_MESSAGE'), 'error', from);
  };
  let e = await errorAfter(() => c.raw('{not json'));
  t.match(e, { sequence: null, payload: { level: 'SYSTEM_MESSAGE_LEVEL_ERROR', message: 'Unknown event type or invalid message format' } });
  e = await errorAfter(() => c.send('EVENT_TYPE_DANCE', {}, { n: 1 }));
  t.match(e, { payload: { message: 'Unknown event type or invalid message format' }, metadata: { custom: { n: 1 } } });
  e = await errorAfter(() => c.send(T('SERVICE_AGENT_MESSAGE'), { text: 'I am the agent now' }, { n: 2 }));
  t.match(e, { payload: { level: 'SYSTEM_MESSAGE_LEVEL_ERROR', message: 'Event type not allowed: EVENT_TYPE_SERVICE_AGENT_MESSAGE' }, metadata: { custom: { n: 2 } } });
  for (const custom of ['a string', 7, ['a', 1], true]) {
    e = await errorAfter(() => c.raw(JSON.stringify({ type: 'EVENT_TYPE_DANCE', payload: {}, metadata: { custom } })));
    t.same(e.metadata, { custom }, `metadata.custom ${JSON.stringify(custom)} is echoed as it was sent`);
  }
  e = await errorAfter(() => c.send(T('SESSION_END'), {}));
  t.equal(e.payload.message, 'Event type not allowed: EVENT_TYPE_SESSION_END');
  // Types named as what every object inherits are unknown types like any other.
  for (const type of ['constructor', 'toString', '__proto__', 'valueOf', 'hasOwnProperty']) {
    e = await errorAfter(() => c.raw(JSON.stringify({ type, payload: {} })));
    t.equal(e.payload.message, 'Unknown event type or invalid message format', `type ${type}`);
  }
  // A key named __proto__ would not be echoed or replayed as sent (a copy makes it a prototype): refused.
  for (const frame of ['{"type":"EVENT_TYPE_HEARTBEAT","payload":{},"metadata":{"custom":{"__proto__":{"x":1}}}}', '{"type":"EVENT_TYPE_HEARTBEAT","payload":{"\\u005f_proto__":1}}']) {
    e = await errorAfter(() => c.raw(frame));
    t.equal(e.payload.message, 'Unknown event type or invalid message format', frame);
  }
  // A lone surrogate escape would be journaled as U+FFFD, and a number past a double's range as null, not as sent:
  // an invalid frame, as malformed JSON is.
  for (const frame of [String.raw`{"type":"EVENT_TYPE_USER_MESSAGE","payload":{"text":"hi \ud800"}}`, String.raw`{"type":"EVENT_TYPE_HEARTBEAT","payload":{},"metadata":{"custom":{"\udc00":1}}}`, '{"type":"EVENT_TYPE_HEARTBEAT","payload":{},"metadata":{"custom":{"n":-1e400}}}']) {
    e = await errorAfter(() => c.raw(frame));
    t.equal(e.payload.message, 'Unknown event type or invalid message format', frame);
  }
  e = await errorAfter(() => c.send(T('USER_MESSAGE'), { text: 42 }));
  t.equal(e.payload.message, 'Unknown event type or invalid message format', 'a user message without text');
  e = await errorAfter(() => c.send(T('USER_TYPING'), { state: 'TYPING_MAYBE' }));
  t.equal(e.payload.message, 'Unknown event type or invalid message format');
  e = await errorAfter(() => c.send(T('USER_MESSAGE'), { text: 'x'.repeat(140_000) }, { n: 3 }));
  t.equal(e.payload.message, 'Unknown event type or invalid message format', 'over 128 KiB');
  t.same(e.metadata, { custom: { n: 3 } }, 'refused for its size, its custom echoed all the same');
  e = await errorAfter(() => c.send(T('USER_MESSAGE'), { text: 'hello?' }, { n: 4 }));
  t.match(e, { payload: { message: 'Error: Conversation not found' }, metadata: { custom: { n: 4 } } }, 'a message before the join');
  t.equal(c.ws.readyState, c.ws.OPEN, 'the socket is still open');
  // Nothing of that was journaled: a replay holds SESSION_START only.
  const r = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  const batch = await r.waitFor(is('EVENT_BATCH'));
  t.same(batch.payload.events.map((x: Ev) => x.type), [T('SESSION_START')]);
  await r.close();

  // The connector is removed: events that need it fail, new handshakes are refused.
  const gone = await messagingProject(p, { name: 'Gone Co' });
  const s2 = await gone.session();
  const c2 = await connect(p.socket, { session_id: s2.sessionId, access_token: s2.accessToken });
  await c2.waitFor(is('EVENT_BATCH'));
  await http(p.edge, 'DELETE', `/admin/v1/connectors/${gone.connectorId}`, { headers: { authorization: `Bearer ${p.operatorToken}` } });
  c2.send(T('REQUEST_SERVICE_AGENT_JOIN'), {}, { n: 5 });
  const e2 = await c2.waitFor(is('SYSTEM_MESSAGE'));
  t.match(e2, { payload: { level: 'SYSTEM_MESSAGE_LEVEL_ERROR', message: 'Error: Connector not found' }, metadata: { custom: { n: 5 } } });
  t.equal((await handshakeStatus(p.socket, { session_id: s2.sessionId, access_token: s2.accessToken })).status, 401);
  t.equal((await http(p.socket, 'POST', '/api/v1/sessions', { body: {}, headers: { Authorization: `Bearer ${s2.accessToken}` } })).status, 401);
  await c2.close();
  await c.close();
});

/** A joined session with its client, the greeting received. */
const joinedSession = async (proj: MessagingProject, body: unknown = {}) => {
  const s = await proj.session(body);
  const c = await connect(p.socket, { session_id: s.sessionId, access_token: s.accessToken });
  await c.waitFor(is('EVENT_BATCH'));
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await c.waitFor((e) => e.type === T('SERVICE_AGENT_MESSAGE') || e.type === T('SERVICE_AGENT_MESSAGE_CHUNK'), 'greeting');
  await c.waitFor((e) => e.type === T('SERVICE_AGENT_MESSAGE') || (e.type === T('SERVICE_AGENT_MESSAGE_CHUNK') && e.payload.is_complete), 'greeting done');
  return { ...s, c };
};

t.test('reconnect with a cursor replays what came after it; an invalid cursor replays everything', async (t) => {
  const { sessionId, accessToken, c } = await joinedSession(m);
  c.send(T('USER_MESSAGE'), { text: 'Where can I park?' });
  await c.waitFor((e) => is('SERVICE_AGENT_MESSAGE')(e) && e.sequence === 6, 'reply');
  await c.close();
  const replayOf = async (cursor?: string) => {
    const r = await connect(p.socket, { session_id: sessionId, access_token: accessToken, cursor });
    const b = await r.waitFor(is('EVENT_BATCH'));
    await r.close();
    return b.payload.events.map((e: Ev) => e.sequence);
  };
  t.same(await replayOf(), [1, 2, 3, 4, 5, 6], 'no cursor: everything');
  t.same(await replayOf('4'), [5, 6], 'integer cursor');
  t.same(await replayOf('seq:3'), [4, 5, 6], 'seq:<n> cursor');
  t.same(await replayOf('seq:6'), [], 'nothing after the last');
  t.same(await replayOf('banana'), [1, 2, 3, 4, 5, 6], 'invalid cursor reads as seq:0');
  t.same(await replayOf('-3'), [1, 2, 3, 4, 5, 6]);
  t.same(await replayOf('999'), [1, 2, 3, 4, 5, 6], 'a cursor past the last event names no position: read as seq:0');
  // The replay has the agent's join: a reconnecting client does not join again.
  const r = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  const b = await r.waitFor(is('EVENT_BATCH'));
  t.ok(b.payload.events.some(is('SERVICE_AGENT_JOINED')));
  await r.close();
});

t.test('a socket resumed at a cursor past the end gets every live event after the history, and the session end', async (t) => {
  const { sessionId, accessToken, c } = await joinedSession(m);
  const late = await connect(p.socket, { session_id: sessionId, access_token: accessToken, cursor: '999' });
  const batch = await late.waitFor(is('EVENT_BATCH'));
  const head = Math.max(...batch.payload.events.map((e: Ev) => e.sequence));
  c.raw(JSON.stringify({ type: T('USER_MESSAGE'), payload: { text: 'from the first socket' }, metadata: { custom: 'draft-7' } }));
  const echo = await late.waitFor((e) => is('USER_MESSAGE')(e) && e.payload.text === 'from the first socket', 'the echo on the resumed socket');
  t.equal(echo.sequence, head + 1, 'live events follow the history');
  t.same(echo.metadata, { custom: 'draft-7' }, 'a metadata.custom that is not an object is echoed too');
  await late.waitFor((e) => is('SERVICE_AGENT_MESSAGE')(e) && e.sequence! > head + 1, 'the answer');
  c.send(T('USER_END_SESSION'));
  await late.waitFor(is('SESSION_END'), 'the session end');
  t.equal((await late.closed).code, 1000, 'and is closed with it');
  await c.close();
});

t.test('a dropped connection does not end the session: events sent meanwhile arrive on resume', async (t) => {
  const { sessionId, accessToken, c } = await joinedSession(m);
  const other = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  await other.waitFor(is('EVENT_BATCH'));
  const last = c.flat().filter((e) => e.sequence !== null).at(-1)!.sequence!;
  c.ws.terminate();
  await c.closed;
  // The other device of the session goes on talking while the first is away.
  const fromOther = other.flat().length;
  other.send(T('USER_MESSAGE'), { text: 'When are you open?' });
  await other.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply on the other socket', fromOther);
  const back = await connect(p.socket, { session_id: sessionId, access_token: accessToken, cursor: `seq:${last}` });
  const b = await back.waitFor(is('EVENT_BATCH'));
  t.same(b.payload.events.map((e: Ev) => e.type), [T('USER_MESSAGE'), T('SERVICE_AGENT_MESSAGE')]);
  t.equal(b.payload.events[1].payload.text, 'We are open from 9am to 5pm, Monday to Friday.');
  // Live events reach both sockets of the session.
  back.send(T('HEARTBEAT'), {}, { client_event_id: 'hb-1' });
  const [e1, e2] = await Promise.all([back.waitFor(is('HEARTBEAT')), other.waitFor(is('HEARTBEAT'))]);
  t.equal(e1.id, e2.id, 'the same event (same id) on both sockets');
  await back.close();
  await other.close();
});

t.test('a client_event_id is journaled once; the retry gets the original echo', async (t) => {
  const { sessionId, accessToken, c } = await joinedSession(m);
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'When are you open?' }, { client_event_id: 'dup-1' });
  const first = await c.waitFor(is('USER_MESSAGE'), 'echo', from);
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply', from);
  const next = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'When are you open?' }, { client_event_id: 'dup-1' });
  const again = await c.waitFor(is('USER_MESSAGE'), 'echo of the retry', next);
  t.equal(again.id, first.id, 'the same echo');
  t.equal(again.sequence, first.sequence);
  c.send(T('HEARTBEAT'), {}, { client_event_id: 'after' });
  await c.waitFor((e) => is('HEARTBEAT')(e) && e.metadata.custom?.client_event_id === 'after', 'heartbeat', next);
  const r = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  const b = await r.waitFor(is('EVENT_BATCH'));
  t.equal(b.payload.events.filter(is('USER_MESSAGE')).length, 1, 'journaled once');
  t.equal(b.payload.events.filter(is('SERVICE_AGENT_MESSAGE')).length, 2, 'one turn: greeting and one reply');
  await r.close();
  await c.close();
});

t.test('streaming sessions get the reply as chunks from 1 with the last complete', async (t) => {
  const { c, sessionId, accessToken } = await joinedSession(m, { streaming_enabled: true });
  const start = c.flat().find(is('SESSION_START'))!;
  t.equal(start.payload.capabilities.streaming, true);
  t.notOk(c.flat().some(is('SERVICE_AGENT_MESSAGE')), 'no whole messages on a streaming session');
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'When are you open?' }, { client_event_id: 's1' });
  await c.waitFor((e) => is('SERVICE_AGENT_MESSAGE_CHUNK')(e) && e.payload.is_complete, 'last chunk', from);
  const chunks = c.flat().slice(from).filter(is('SERVICE_AGENT_MESSAGE_CHUNK'));
  t.ok(chunks.length > 1, `${chunks.length} chunks`);
  t.same(chunks.map((x) => x.payload.chunk_index), chunks.map((_, i) => i + 1));
  t.same(chunks.map((x) => x.payload.is_complete), chunks.map((_, i) => i === chunks.length - 1));
  t.equal(new Set(chunks.map((x) => x.payload.message_id)).size, 1, 'one message_id');
  t.equal(chunks.map((x) => x.payload.text).join(''), 'We are open from 9am to 5pm, Monday to Friday.');
  for (const x of chunks) t.match(x, { payload: { attachments: [], response_suggestions: [] }, metadata: { custom: { client_event_id: 's1' } }, sequence: Number });
  await c.close();
  const r = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  t.ok((await r.waitFor(is('EVENT_BATCH'))).payload.events.some(is('SERVICE_AGENT_MESSAGE_CHUNK')), 'chunks are journaled');
  await r.close();
});

t.test('a user message naming another language changes the session language', async (t) => {
  const { c } = await joinedSession(m);
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'Bonjour, quand ouvrez-vous?', language_code: 'fr-FR' }, { n: 1 });
  const changed = await c.waitFor(is('LANGUAGE_CHANGED'), 'language changed', from);
  t.match(changed, { payload: { language_code: 'fr-FR' }, sequence: Number, metadata: { custom: { n: 1 } } });
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply', from);
  const next = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'Merci', language_code: 'fr-FR' });
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply', next);
  t.notOk(c.flat().slice(next).some(is('LANGUAGE_CHANGED')), 'the same language again changes nothing');
  await c.close();
});

t.test('the agent ending the conversation ends the session naturally', async (t) => {
  const { c } = await joinedSession(m);
  c.send(T('USER_MESSAGE'), { text: 'Thanks, goodbye!' });
  const end = await c.waitFor(is('SESSION_END'));
  t.equal(end.payload.reason, 'REASON_NATURAL_END');
  const flat = c.flat();
  t.ok(flat.findIndex((e) => is('SERVICE_AGENT_MESSAGE')(e) && e.payload.text === 'Thanks for chatting with us. Goodbye!') < flat.indexOf(end), 'the goodbye comes first');
  await c.closed;
});

t.test('server-managed handoff with a live agent on the desk', async (t) => {
  const h = await messagingProject(p, { name: 'Handoff Co' });
  const key = await h.liveAgentKey();
  const d = desk(p, key);
  const { c, sessionId, accessToken } = await joinedSession(h);
  t.same((await d('GET', '/sessions')).body, { data: [] }, 'nobody waits yet');
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'I want to speak to a person' });
  await c.waitFor(is('HANDOFF_QUEUE_STATUS'), 'queue status', from);
  const flow = c.flat().slice(from).filter((e) => e.type !== T('SERVICE_AGENT_THINKING')).map((e) => e.type);
  t.same(flow, [T('USER_MESSAGE'), T('SERVICE_AGENT_MESSAGE'), T('SERVICE_AGENT_TRIGGERED_HANDOFF'), T('SERVICE_AGENT_LEFT'), T('HANDOFF_ACCEPTED'), T('HANDOFF_QUEUE_STATUS')]);
  t.match(c.flat().find(is('HANDOFF_QUEUE_STATUS'))!.payload, { queue_name: 'live_agent', position_in_queue: 1 });

  // The desk sees the waiting session; a key of another account does not.
  const waiting = await d('GET', '/sessions');
  t.equal(waiting.status, 200);
  t.match(waiting.body.data, [{ session_id: sessionId, status: 'waiting', handoff: { destination: 'live_agent', mode: 'server' } }]);
  const stranger = desk(p, await m.liveAgentKey());
  t.same((await stranger('GET', '/sessions')).body, { data: [] });
  t.equal((await stranger('POST', `/sessions/${sessionId}/accept`, {})).status, 404);
  t.equal((await desk(p, h.chatKey)('GET', '/sessions')).status, 401, 'a key of another scope');
  t.equal((await d('POST', `/sessions/${sessionId}/messages`, { text: 'too early' })).status, 409, 'nobody has accepted yet');

  // The user writes while waiting; the desk reads it.
  c.send(T('USER_MESSAGE'), { text: 'Still there?' });
  await c.waitFor((e) => is('USER_MESSAGE')(e) && e.payload.text === 'Still there?');
  const accepted = await d('POST', `/sessions/${sessionId}/accept`, { name: 'Sam', avatar_url: 'https://example.com/sam.png' });
  t.equal(accepted.status, 200, accepted.text);
  const joined = await c.waitFor(is('LIVE_AGENT_JOINED'));
  t.match(joined.payload, { agent: { id: String, name: 'Sam', avatar_url: 'https://example.com/sam.png' } });
  const agentId = joined.payload.agent.id;
  t.equal((await d('POST', `/sessions/${sessionId}/accept`, {})).status, 409, 'accepted once');
  const history = await d('GET', `/sessions/${sessionId}/events`);
  t.ok(history.body.events.some((e: Ev) => is('USER_MESSAGE')(e) && e.payload.text === 'Still there?'), 'the desk reads what the user wrote');

  t.equal((await d('POST', `/sessions/${sessionId}/typing`, { state: 'TYPING_STATE_STARTED' })).status, 200);
  t.match(await c.waitFor(is('LIVE_AGENT_TYPING')), { sequence: null, payload: { state: 'TYPING_STATE_STARTED', agent_id: agentId } });
  t.equal((await d('POST', `/sessions/${sessionId}/messages`, { text: 'Hi, Sam here. How can I help?' })).status, 200);
  t.match(await c.waitFor(is('LIVE_AGENT_MESSAGE')), { sequence: Number, payload: { message_id: String, text: 'Hi, Sam here. How can I help?', attachments: [], response_suggestions: [], agent_id: agentId } });

  // User messages during the live handoff reach the desk, not the agent.
  const after = history.body.last_sequence;
  c.send(T('USER_TYPING'), { state: 'TYPING_STATE_STARTED' });
  await eventually(async () => (await d('GET', `/sessions/${sessionId}`)).body.user_typing === 'TYPING_STATE_STARTED', 10_000, 'the desk to see the user typing', 50);
  c.send(T('USER_MESSAGE'), { text: 'My order is late' });
  const got = await eventually(async () => {
    const r = await d('GET', `/sessions/${sessionId}/events?after=${after}`);
    return r.body.events.find((e: Ev) => is('USER_MESSAGE')(e) && e.payload.text === 'My order is late');
  }, 10_000, 'the user message at the desk', 50);
  t.ok(got, 'the desk gets the user message');
  const mark = c.flat().length;
  await new Promise((r) => setTimeout(r, 200));
  t.notOk(c.flat().slice(mark).some(is('SERVICE_AGENT_MESSAGE')), 'the agent does not answer during the live handoff');

  // A reconnect mid-handoff replays the whole handoff.
  const r = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  const b = await r.waitFor(is('EVENT_BATCH'));
  t.ok(b.payload.events.some(is('LIVE_AGENT_JOINED')) && b.payload.events.some(is('LIVE_AGENT_MESSAGE')));
  await r.close();

  t.equal((await d('POST', `/sessions/${sessionId}/leave`)).status, 200);
  await c.waitFor(is('LIVE_AGENT_LEFT'));
  t.equal((await c.waitFor(is('SESSION_END'))).payload.reason, 'REASON_NATURAL_END');
  await c.closed;
  t.equal((await d('GET', `/sessions/${sessionId}`)).body.status, 'ended');
});

t.test('sessions waiting for a live agent hear their place in the queue change', async (t) => {
  const q = await messagingProject(p, { name: 'Queue Co' });
  const d = desk(p, await q.liveAgentKey());
  const first = await joinedSession(q);
  const second = await joinedSession(q);
  first.c.send(T('USER_MESSAGE'), { text: 'I want to speak to a person' });
  t.equal((await first.c.waitFor(is('HANDOFF_QUEUE_STATUS'))).payload.position_in_queue, 1);
  // Places in the queue are counted on the session records, a read model that follows the journal.
  await waitForProjections(p);
  second.c.send(T('USER_MESSAGE'), { text: 'I want to speak to a person' });
  t.equal((await second.c.waitFor(is('HANDOFF_QUEUE_STATUS'))).payload.position_in_queue, 2, 'behind the first');
  t.same((await d('GET', '/sessions')).body.data.map((x: any) => x.session_id), [first.sessionId, second.sessionId]);
  t.equal((await d('POST', `/sessions/${first.sessionId}/accept`, {})).status, 200);
  const moved = await second.c.waitFor((e) => is('HANDOFF_QUEUE_STATUS')(e) && e.payload.position_in_queue === 1, 'moved up');
  t.match(moved, { sequence: Number, payload: { queue_name: 'live_agent', position_in_queue: 1 } });
  await first.c.close();
  await second.c.close();
});

t.test('client-managed handoff: CLIENT_HANDOFF_REQUIRED, and the session forwards nothing', async (t) => {
  const h = await messagingProject(p, { name: 'Client Handoff Co' });
  await h.api('PATCH', `/v1/agents/${h.agentId}/real-time-configs/live/variables`, { variables: { handoff_mode: 'client', handoff_destination: 'zendesk', handoff_reason: 'policy' } });
  const { c } = await joinedSession(h);
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'Let me talk to a human' });
  await c.waitFor(is('SERVICE_AGENT_LEFT'), 'agent left', from);
  const flow = c.flat().slice(from).filter((e) => e.type !== T('SERVICE_AGENT_THINKING')).map((e) => e.type);
  t.same(flow, [T('USER_MESSAGE'), T('SERVICE_AGENT_MESSAGE'), T('SERVICE_AGENT_TRIGGERED_HANDOFF'), T('CLIENT_HANDOFF_REQUIRED'), T('SERVICE_AGENT_LEFT')]);
  t.same(c.flat().find(is('CLIENT_HANDOFF_REQUIRED'))!.payload, { reason: 'POLICY', queue_name: 'zendesk' });
  const next = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'hello?' }, { n: 1 });
  t.match(await c.waitFor(is('SYSTEM_MESSAGE'), 'error', next), { payload: { level: 'SYSTEM_MESSAGE_LEVEL_ERROR', message: 'Failed to forward message to live agent' }, metadata: { custom: { n: 1 } } });
  await c.close();
});

t.test('handoff without live agents fails; a bad handoff configuration cannot be initiated', async (t) => {
  const h = await messagingProject(p, { name: 'No Desk Co' });
  const { c } = await joinedSession(h);
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'I want to speak to a person' }, { ref: 'm1' });
  const failed = await c.waitFor(is('SYSTEM_MESSAGE'), 'error', from);
  t.equal(failed.payload.message, 'Sorry, we could not connect you to an agent. Please try again.');
  t.ok(c.flat().slice(from).some(is('HANDOFF_FAILED')));
  // The agent has handed the conversation off and no live agent can take it: the session ends after the error
  // (contract 6.3), instead of refusing every later message.
  const end = await c.waitFor(is('SESSION_END'), 'the session ends', from);
  t.equal(end.payload.reason, 'REASON_NATURAL_END');
  // Every event that answers the message echoes its custom, the error's included (contract 2.9).
  for (const e of c.flat().slice(from)) t.same(e.metadata, { custom: { ref: 'm1' } }, `${e.type} echoes the message's custom`);
  t.equal((await c.closed).code, 1000);
  await c.close();

  await h.api('PATCH', `/v1/agents/${h.agentId}/real-time-configs/live/variables`, { variables: { handoff_mode: 'carrier-pigeon' } });
  const s2 = await joinedSession(h);
  const f2 = s2.c.flat().length;
  s2.c.send(T('USER_MESSAGE'), { text: 'I want to speak to a person' });
  t.equal((await s2.c.waitFor(is('SYSTEM_MESSAGE'), 'error', f2)).payload.message, 'Sorry, handoff could not be initiated.');
  await s2.c.waitFor(is('SESSION_END'), 'this session ends too', f2);
  await s2.c.close();
});

t.test('the desk acts on a waiting session before its record is projected: actions and events read the journal', async (t) => {
  const h = await messagingProject(p, { name: 'Early Desk Co' });
  const key = await h.liveAgentKey();
  const { c, sessionId } = await joinedSession(h);
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'I want to speak to a person' });
  await c.waitFor(is('HANDOFF_QUEUE_STATUS'), 'queue status', from);
  await waitForProjections(p);
  // As if the projection had not reached the session yet (it lags the journal): the visitor was told it waits.
  t.equal(await sessionRecords(store).delete({ id: sessionId }), 1);
  const d = (method: string, path: string, body?: unknown) => http(p.socket, method, `/api/v1/desk${path}`, { body, headers: { 'x-api-key': key } });
  const events = await d('GET', `/sessions/${sessionId}/events`);
  t.equal(events.status, 200, events.text);
  t.ok(events.body.events.some((e: Ev) => e.type === T('HANDOFF_ACCEPTED')), 'its events, from the journal');
  const accepted = await d('POST', `/sessions/${sessionId}/accept`, { name: 'Sam' });
  t.equal(accepted.status, 200, accepted.text);
  await c.waitFor(is('LIVE_AGENT_JOINED'), 'the visitor hears the agent join');
  t.equal((await d('POST', `/sessions/${sessionId}/messages`, { text: 'Hi, Sam here' })).status, 200);
  t.equal((await d('POST', `/sessions/${sessionId}/typing`, { state: 'TYPING_STATE_STARTED' })).status, 200);
  const stranger = await (await messagingProject(p, { name: 'Stranger Desk Co' })).liveAgentKey();
  t.equal((await http(p.socket, 'POST', `/api/v1/desk/sessions/${sessionId}/accept`, { body: {}, headers: { 'x-api-key': stranger } })).status, 404, 'another account\'s desk');
  t.equal((await d('POST', '/sessions/ses_nosuchsession0000/accept', {})).status, 404, 'an unknown session');
  t.equal((await d('POST', `/sessions/${sessionId}/leave`)).status, 200);
  await c.close();
});

t.test('the Messaging API answers from the session actor and its journal, never from the session records (a projection)', async (t) => {
  const key = await m.liveAgentKey();
  const { sessionId, accessToken } = await m.session();
  await desk(p, key)('GET', '/sessions?status=active');
  // The read model loses the session: nothing the Messaging API answers depends on it.
  t.equal(await sessionRecords(store).delete({ id: sessionId }), 1, 'the record was projected, and is gone');
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  t.same((await c.waitFor(is('EVENT_BATCH'))).payload.events.map((e: Ev) => e.type), [T('SESSION_START')], 'handshake and replay from the journal');
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  c.send(T('USER_MESSAGE'), { text: 'When are you open on Monday?' }, { client_event_id: 'np-1' });
  const reply = await c.waitFor((e) => is('SERVICE_AGENT_MESSAGE')(e) && e.metadata.custom?.client_event_id === 'np-1', 'reply');
  t.equal(reply.payload.text, 'We are open from 9am to 5pm, Monday to Friday.');
  const before = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'When are you open on Monday?' }, { client_event_id: 'np-1' });
  t.equal((await c.waitFor(is('USER_MESSAGE'), 'the original echo again', before)).sequence, reply.sequence! - 1, 'a duplicate is answered from the journal');
  t.equal((await desk(p, key)('GET', `/sessions/${sessionId}`)).status, 404, 'only the desk reads the records');
  await c.close();
});

t.test('a message sent right after the end is answered "Error: Session not found" before the socket closes', async (t) => {
  const { sessionId, accessToken } = await m.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  await c.waitFor(is('EVENT_BATCH'), 'batch');
  // Back to back: the message's frame is in before the end's step is done.
  c.send(T('USER_END_SESSION'));
  c.send(T('USER_MESSAGE'), { text: 'one more thing' }, { n: 7 });
  await c.waitFor(is('SESSION_END'), 'session end');
  t.equal((await c.closed).code, 1000, 'closed after the end');
  const error = c.flat().find((e) => e.type === T('SYSTEM_MESSAGE') && e.payload?.level === 'SYSTEM_MESSAGE_LEVEL_ERROR');
  t.match(error, { payload: { message: 'Error: Session not found' }, metadata: { custom: { n: 7 } } }, 'the message answered before the close');
});
