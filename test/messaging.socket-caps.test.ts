/**
 * The socket gateway's caps on open WebSockets (`SOCKET_MAX_CONNECTIONS`, `SOCKET_MAX_CONNECTIONS_PER_ACCOUNT`):
 * past the account's cap its next upgrade is 429 `ACCOUNT_CONNECTION_LIMIT_EXCEEDED` (with `Retry-After`, before
 * any socket is accepted) while another account still connects; a socket's close, by the client or by the session's
 * end, gives its place back; past the process's cap anyone's upgrade is 429 `GATEWAY_CONNECTION_LIMIT_EXCEEDED`.
 * An audit had one account hold 8,141 sockets, the process's every file descriptor, and the other tenants' Chat
 * and Messaging requests then went unanswered.
 */
import t from 'tap';
import { connect, is, T, type Client, messagingProject } from './helpers/messaging.js';
import { platformFor } from './helpers/platform.js';

/** The handshake's refusal: status, body and headers (the socket is closed if it opened). */
async function refusal(socket: string, q: Record<string, string>): Promise<{ status: number; body: any; headers: Record<string, unknown> }> {
  try {
    const c = await connect(socket, q);
    await c.close();
    return { status: 101, body: null, headers: {} };
  } catch (err) {
    const e = err as { status?: number; body?: string; headers?: Record<string, unknown> };
    return { status: e.status ?? 0, body: e.body ? JSON.parse(e.body) : null, headers: e.headers ?? {} };
  }
}

t.test('per account and per process: the next upgrade is 429 past a cap, and a close gives the place back', async (t) => {
  const p = await platformFor(t, { env: { SOCKET_MAX_CONNECTIONS: '5', SOCKET_MAX_CONNECTIONS_PER_ACCOUNT: '3' } });
  const A = await messagingProject(p, { name: 'Tenant A' });
  const B = await messagingProject(p, { name: 'Tenant B' });
  t.not(A.accountId, B.accountId);
  // A's three places over two sessions: the cap is the account's, not a session's (MESSAGING_MAX_CONNECTIONS is 10).
  const a1 = await A.session();
  const a2 = await A.session({}, p.socket, a1.accessToken);
  const q = (s: { sessionId: string; accessToken: string }) => ({ session_id: s.sessionId, access_token: s.accessToken });
  const open: Client[] = [];
  open.push(await connect(p.socket, q(a1)), await connect(p.socket, q(a1)), await connect(p.socket, q(a2)));

  const overA = await refusal(p.socket, q(a2));
  t.equal(overA.status, 429, "A's fourth socket is refused");
  t.same(overA.body, {
    success: false,
    error: 'connection limit exceeded for account',
    error_code: 'ACCOUNT_CONNECTION_LIMIT_EXCEEDED',
    error_message: 'connection limit exceeded for account',
    data: null,
  });
  t.equal(overA.headers['retry-after'], '5');
  t.equal(overA.headers['access-control-allow-origin'], '*', 'the CORS header of every Messaging answer');

  // B still connects: two more, the process's fifth socket.
  const b1 = await B.session();
  const bs = [await connect(p.socket, q(b1)), await connect(p.socket, q(b1))];
  for (const c of bs) t.ok(c.events.some(is('EVENT_BATCH')), "B's socket is open and replayed");

  // The process is full: B, under its own cap, is refused, and so is A.
  const overGateway = await refusal(p.socket, q(b1));
  t.equal(overGateway.status, 429, 'past the process cap');
  t.equal(overGateway.body.error_code, 'GATEWAY_CONNECTION_LIMIT_EXCEEDED');
  t.equal(overGateway.body.error, 'connection limit exceeded for gateway');
  t.equal(overGateway.headers['retry-after'], '5');
  t.equal((await refusal(p.socket, q(a1))).body.error_code, 'ACCOUNT_CONNECTION_LIMIT_EXCEEDED', 'A is told its own cap first');

  // A client's close gives its place back: A connects again.
  await open.shift()!.close();
  const again = await connect(p.socket, q(a1));
  t.ok(again.events.some(is('EVENT_BATCH')), 'A connects again after closing a socket');
  open.push(again);
  t.equal((await refusal(p.socket, q(a1))).status, 429, 'and is at its cap again');

  // The session's end closes its sockets from the server: their places are given back too.
  open[2]!.send(T('USER_END_SESSION'));
  await Promise.all(open.filter((c) => c.ws.url.includes(a1.sessionId)).map((c) => c.closed));
  t.equal(open.filter((c) => c.ws.url.includes(a1.sessionId)).length, 2);
  const a3 = await A.session({}, p.socket, a1.accessToken);
  const more = [await connect(p.socket, q(a3)), await connect(p.socket, q(a3))];
  for (const c of more) t.ok(c.events.some(is('EVENT_BATCH')), "A's places freed by its session's end are taken again");
  t.equal((await refusal(p.socket, q(b1))).body.error_code, 'GATEWAY_CONNECTION_LIMIT_EXCEEDED', 'five open again: the process is full');
  for (const c of [...open, ...bs, ...more]) await c.close();
});

t.test('an upgrade refused after its place was taken (the session full or ended) gives the place back', async (t) => {
  const p = await platformFor(t, { env: { SOCKET_MAX_CONNECTIONS: '100', SOCKET_MAX_CONNECTIONS_PER_ACCOUNT: '2', MESSAGING_MAX_CONNECTIONS: '1' } });
  const A = await messagingProject(p, { name: 'Tenant A' });
  const q = (s: { sessionId: string; accessToken: string }) => ({ session_id: s.sessionId, access_token: s.accessToken });
  const s1 = await A.session();
  const c1 = await connect(p.socket, q(s1));
  // Refused by the session (its one place is held), three times: each took, then gave back, A's second place.
  for (let i = 0; i < 3; i++) t.equal((await refusal(p.socket, q(s1))).body.error_code, 'CONNECTION_LIMIT_EXCEEDED');
  // Refused as ended: the session's end closed c1 (its place given back), and the ended session's refusals too.
  c1.send(T('USER_END_SESSION'));
  await c1.closed;
  for (let i = 0; i < 3; i++) t.equal((await refusal(p.socket, q(s1))).body.error_code, 'SESSION_NOT_FOUND');
  const s2 = await A.session({}, p.socket, s1.accessToken);
  const s3 = await A.session({}, p.socket, s1.accessToken);
  const open = [await connect(p.socket, q(s2)), await connect(p.socket, q(s3))];
  for (const c of open) t.ok(c.events.some(is('EVENT_BATCH')), 'A holds its two places');
  const s4 = await A.session({}, p.socket, s1.accessToken);
  t.equal((await refusal(p.socket, q(s4))).body.error_code, 'ACCOUNT_CONNECTION_LIMIT_EXCEEDED', 'and no more');
  for (const c of open) await c.close();
});
