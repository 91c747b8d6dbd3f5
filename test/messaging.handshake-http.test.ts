/**
 * A plain HTTP GET of the socket path (no WebSocket upgrade), as a client over loopback: the handshake's
 * checks answer as they do an upgrade (400 parameters, 401 credentials, 404 session, in the Messaging API's
 * error shape), and once they pass the answer is 400 UPGRADE_REQUIRED. Nothing is registered with the session.
 */
import t from 'tap';
import { http } from './helpers/http.js';
import { connect, handshakeStatus, is, T, messagingProject, type MessagingProject } from './helpers/messaging.js';
import { platformFor, type Platform } from './helpers/platform.js';

let p: Platform;
let m: MessagingProject;

t.before(async () => {
  p = await platformFor(t);
  m = await messagingProject(p);
});

const wsPath = (q: Record<string, string | undefined>) => {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined) params.set(k, v);
  const s = params.toString();
  return s ? `/ws?${s}` : '/ws';
};
const plainGet = (q: Record<string, string | undefined>) => http(p.socket, 'GET', wsPath(q));
const shape = (code: string, message: string) => ({ success: false, error: message, error_code: code, error_message: message, data: null });

t.test('each handshake refusal is the same on a plain GET as on an upgrade', async (t) => {
  const { sessionId, accessToken } = await m.session();
  const other = await messagingProject(p, { name: 'Other Co' });
  const cases: Array<[string, Record<string, string | undefined>, number, string, string]> = [
    ['no parameters', {}, 400, 'INVALID_CONNECTION_PARAMETERS', 'invalid connection parameters'],
    ['no session_id', { access_token: accessToken }, 400, 'INVALID_CONNECTION_PARAMETERS', 'invalid connection parameters'],
    ['no access_token', { session_id: sessionId }, 400, 'INVALID_CONNECTION_PARAMETERS', 'invalid connection parameters'],
    ['a token that is not one', { session_id: sessionId, access_token: 'garbage' }, 401, 'AUTHENTICATION_FAILED', 'authentication failed'],
    ['another connector\'s token', { session_id: sessionId, access_token: await other.accessToken() }, 401, 'AUTHENTICATION_FAILED', 'authentication failed'],
    ['an unknown session', { session_id: 'ses_unknown', access_token: accessToken }, 404, 'SESSION_NOT_FOUND', 'session not found'],
    ['a malformed session id', { session_id: 'not a valid id!', access_token: accessToken }, 404, 'SESSION_NOT_FOUND', 'session not found'],
  ];
  for (const [what, q, status, code, message] of cases) {
    const r = await plainGet(q);
    t.equal(r.status, status, `${what}: ${status} (${r.text})`);
    t.same(r.body, shape(code, message), `${what}: the Messaging API's error shape`);
    t.match(r.headers.get('content-type'), /application\/json/, `${what}: JSON`);
    // As every Messaging API answer: a browser widget reads the refusal rather than a CORS failure.
    t.equal(r.headers.get('access-control-allow-origin'), '*', `${what}: the CORS header`);
    t.same(await handshakeStatus(p.socket, q), { status, body: shape(code, message) }, `${what}: an upgrade is answered alike`);
  }
});

t.test('checks passed: 400 UPGRADE_REQUIRED, and nothing registered with the session', async (t) => {
  const { sessionId, accessToken } = await m.session();
  const r = await plainGet({ session_id: sessionId, access_token: accessToken, cursor: 'seq:0' });
  t.equal(r.status, 400, r.text);
  t.same(r.body, shape('UPGRADE_REQUIRED', 'a WebSocket upgrade is required'));
  t.equal(r.headers.get('access-control-allow-origin'), '*', 'the CORS header');
  const head = await http(p.socket, 'HEAD', wsPath({ session_id: sessionId, access_token: accessToken }));
  t.equal(head.status, 400, 'a HEAD of the socket path is told what its GET is');
  t.equal((await plainGet({ session_id: sessionId, access_token: accessToken, cursor: 'not a cursor' })).status, 400, 'an invalid cursor is read as 0, as on an upgrade');
  // Plain GETs take no place in the session's connection count (MESSAGING_MAX_CONNECTIONS, 10): ten sockets still fit.
  for (let i = 0; i < 10; i++) await plainGet({ session_id: sessionId, access_token: accessToken });
  const open = [];
  for (let i = 0; i < 10; i++) open.push(await connect(p.socket, { session_id: sessionId, access_token: accessToken }));
  t.equal(open.length, 10, 'ten sockets opened after ten plain GETs');
  for (const c of open) await c.close();
});

t.test('an ended session is 404 on a plain GET, as on an upgrade', async (t) => {
  const { sessionId, accessToken } = await m.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  await c.waitFor(is('EVENT_BATCH'), 'batch');
  c.send(T('USER_END_SESSION'));
  await c.waitFor(is('SESSION_END'), 'session end');
  await c.closed;
  const r = await plainGet({ session_id: sessionId, access_token: accessToken });
  t.equal(r.status, 404, r.text);
  t.same(r.body, shape('SESSION_NOT_FOUND', 'session not found'));
  t.equal((await handshakeStatus(p.socket, { session_id: sessionId, access_token: accessToken })).status, 404, 'and on an upgrade');
});

t.test('other methods and paths are still unknown routes', async (t) => {
  const r = await http(p.socket, 'POST', '/ws');
  t.equal(r.status, 404);
  t.match(r.body, { success: false, error_code: 'NOT_FOUND', data: null });
  const wrong = await http(p.socket, 'GET', '/wsx');
  t.equal(wrong.status, 404);
  t.equal(wrong.headers.get('access-control-allow-origin'), '*', 'the 404 carries the CORS header');
});
