/**
 * The Messaging API's edges: a per-client-address rate over the token step, the session step and socket
 * upgrades (429 with Retry-After, the upgrade refused); access tokens without `exp` refused even when signed
 * with the right key; JSON nested deeper than JSON_MAX_DEPTH refused on the session step (400) and on the
 * socket (an error event, the socket and what the session stored intact).
 */
import t from 'tap';
import { request } from 'node:http';
import { SignJWT } from 'jose';
import { JSON_MAX_DEPTH } from '../platform/json-depth.js';
import { http } from './helpers/http.js';
import { connect, handshakeStatus, is, T, type MessagingProject, messagingProject } from './helpers/messaging.js';
import { platformFor, type Platform } from './helpers/platform.js';

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

/** One request from a chosen loopback address (the whole 127/8 is local), so tests can be several clients. */
function from(localAddress: string, base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Raw> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method, headers, localAddress }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? JSON.parse(text) : null }));
    });
    // An accepted WebSocket upgrade: the status is 101 and nothing more is read.
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 101, headers: res.headers, body: null });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const upgradeHeaders = { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==' };

t.test('per client address: token step, session step and upgrades share a bucket; other addresses are untouched', async (t) => {
  const p = await platformFor(t, { env: { MESSAGING_ADDRESS_RATE: '6' } });
  // Set-up traffic comes from 127.0.0.1; the client under test is 127.0.0.2.
  const m = await messagingProject(p);
  const A = '127.0.0.2';
  const token = (addr: string) => from(addr, p.socket, 'POST', '/api/v1/access-token', { 'X-Token': m.connectorToken, 'X-Host': m.host, 'content-type': 'application/json' }, '{}');
  const session = (addr: string, accessToken: string) => from(addr, p.socket, 'POST', '/api/v1/sessions', { Authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' }, '{}');
  const upgrade = (addr: string, sessionId: string, accessToken: string) =>
    from(addr, p.socket, 'GET', `/ws?session_id=${sessionId}&access_token=${encodeURIComponent(accessToken)}`, upgradeHeaders);

  const tk = await token(A);
  t.equal(tk.status, 200);
  const s = await session(A, tk.body.access_token);
  t.equal(s.status, 200);
  t.equal((await upgrade(A, s.body.session_id, tk.body.access_token)).status, 101);
  t.equal((await token(A)).status, 200);
  t.equal((await session(A, tk.body.access_token)).status, 200);
  t.equal((await upgrade(A, s.body.session_id, tk.body.access_token)).status, 101, 'the sixth request of the address');

  for (const [what, r] of [
    ['token step', await token(A)],
    ['session step', await session(A, tk.body.access_token)],
    ['upgrade', await upgrade(A, s.body.session_id, tk.body.access_token)],
  ] as const) {
    t.equal(r.status, 429, `${what}: 429`);
    t.match(r.body, { success: false, error: 'Rate limit exceeded', error_code: 'RATE_LIMIT_EXCEEDED', data: null }, `${what}: the messaging error shape`);
    const retry = Number(r.headers['retry-after']);
    t.ok(Number.isInteger(retry) && retry >= 1, `${what}: Retry-After in whole seconds (${r.headers['retry-after']})`);
  }
  t.equal((await from(A, p.socket, 'POST', '/api/v1/sessions', { 'content-type': 'application/json' }, '{}')).status, 429, 'junk credentials are cut by the address limit too');

  const B = '127.0.0.3';
  const tb = await token(B);
  t.equal(tb.status, 200, 'another address has its own bucket');
  t.equal((await session(B, tb.body.access_token)).status, 200);
});

t.test('tokens without exp, and JSON deeper than the limit', async (t) => {
  const secret = 'edge-hardening-test-secret-0123456789abcdef';
  const p: Platform = await platformFor(t, { env: { MESSAGING_SECRET: secret } });
  const m: MessagingProject = await messagingProject(p);
  const good = await m.accessToken();
  const claims = JSON.parse(Buffer.from(good.split('.')[1], 'base64url').toString('utf8'));

  t.test('an access token without exp is 401, though signed with the right key', async (t) => {
    const { exp, iat, jti, ...rest } = claims;
    t.ok(exp && iat && jti, 'issued tokens carry exp');
    const key = new TextEncoder().encode(secret);
    const mint = (withExp: boolean) => {
      const jwt = new SignJWT(rest).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt();
      return (withExp ? jwt.setExpirationTime('1h') : jwt).sign(key);
    };
    const sessions = (token: string) => http(p.socket, 'POST', '/api/v1/sessions', { body: {}, headers: { Authorization: `Bearer ${token}` } });
    const withExp = await sessions(await mint(true));
    t.equal(withExp.status, 200, 'the same claims with exp are accepted: the key and claims are right');
    const forever = await mint(false);
    const r = await sessions(forever);
    t.equal(r.status, 401);
    t.same(r.body, { success: false, error: 'Invalid access token', error_code: 'INVALID_ACCESS_TOKEN', error_message: 'Invalid access token', data: null });
    t.match(await handshakeStatus(p.socket, { session_id: withExp.body.session_id, access_token: forever }), { status: 401, body: { error: 'authentication failed' } }, 'and on the handshake');
  });

  const nest = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

  t.test('session step: a body deeper than the limit is a 400 in the error shape', async (t) => {
    // The body object is one level; `x` adds the rest.
    const at = await http(p.socket, 'POST', '/api/v1/sessions', { raw: `{"x":${nest(JSON_MAX_DEPTH - 1)}}`, headers: { Authorization: `Bearer ${good}`, 'content-type': 'application/json' } });
    t.equal(at.status, 200, 'at the limit');
    for (const depth of [JSON_MAX_DEPTH, 100_000]) {
      const r = await http(p.socket, 'POST', '/api/v1/sessions', { raw: `{"x":${nest(depth)}}`, headers: { Authorization: `Bearer ${good}`, 'content-type': 'application/json' } });
      t.equal(r.status, 400, `${depth + 1} levels`);
      t.match(r.body, { success: false, error_code: 'REQUEST_PARSE_ERROR' });
    }
  });

  t.test('socket: a frame deeper than the limit is an error event; the socket and the journal stay', async (t) => {
    const { sessionId, accessToken } = await m.session();
    const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
    await c.waitFor(is('EVENT_BATCH'));
    c.send(T('HEARTBEAT'), {}, { n: 1 });
    await c.waitFor((e) => e.type === T('HEARTBEAT') && e.metadata?.custom?.n === 1, 'first echo');
    // {type, payload, metadata: {custom: {deep: ...}}}: three levels before `deep`.
    const frame = (depth: number) => `{"type":"${T('HEARTBEAT')}","payload":{},"metadata":{"custom":{"n":2,"deep":${nest(depth)}}}}`;
    for (const depth of [JSON_MAX_DEPTH - 2, 100_000]) {
      const before = c.flat().length;
      c.raw(frame(depth));
      const e = await c.waitFor((x) => x.type === T('SYSTEM_MESSAGE'), 'error event', before);
      t.match(e, { sequence: null, payload: { level: 'SYSTEM_MESSAGE_LEVEL_ERROR', message: 'Unknown event type or invalid message format' } }, `${depth + 3} levels`);
    }
    t.equal(c.ws.readyState, c.ws.OPEN, 'the socket is still open');
    const before = c.flat().length;
    c.raw(frame(JSON_MAX_DEPTH - 3));
    const echo = await c.waitFor((e) => e.type === T('HEARTBEAT'), 'echo at the limit', before);
    t.equal(echo.metadata.custom.n, 2, 'a frame at the limit is applied');
    c.send(T('HEARTBEAT'), {}, { n: 3 });
    await c.waitFor((e) => e.type === T('HEARTBEAT') && e.metadata?.custom?.n === 3, 'later events still flow');
    await c.close();
    const r = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
    const batch = await r.waitFor(is('EVENT_BATCH'));
    t.same(batch.payload.events.map((x: any) => [x.type, x.metadata?.custom?.n]), [[T('SESSION_START'), undefined], [T('HEARTBEAT'), 1], [T('HEARTBEAT'), 2], [T('HEARTBEAT'), 3]], 'the journal lost nothing and took nothing refused');
    await r.close();
  });
});
