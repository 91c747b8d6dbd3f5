/**
 * Slow clients. A slow-loris client (many connections to the edge, each dribbling header lines) is
 * disconnected once the header deadline passes (408), and while the edge is under such an attack the socket
 * gateway in the same process still accepts and serves a messaging session: the edge holds at most
 * EDGE_MAX_CONNECTIONS connections, so the process's file descriptors (here a small open-file limit, set once
 * it serves) are not used up. A body dribbled to the socket gateway is answered 408 once its deadline passes, and a WebSocket peer
 * that answers no pings is closed after the socket idle timeout.
 * Deadlines are set small through the environment; bounds are generous multiples of them.
 */
import t from 'tap';
import net from 'node:net';
import { readdirSync, readFileSync } from 'node:fs';
import { connect, is, T, messagingProject, type MessagingProject } from './helpers/messaging.js';
import { http } from './helpers/http.js';
import { platformFor, type Platform } from './helpers/platform.js';

const HEADERS_TIMEOUT_MS = 1000;
const BODY_TIMEOUT_MS = 1000;
/** The smallest idle timeout uWebSockets.js takes. */
const SOCKET_IDLE_TIMEOUT_S = 8;
const MAX_CONNECTIONS = 32;
/** The platform needs a few dozen descriptors of its own; an attack of ATTACKERS connections would take the rest. */
const FD_LIMIT = 160;
const ATTACKERS = 200;
/** What the cap leaves free through the attack, at least: without it the attack would take every descriptor. */
const SPARE_FDS = 32;
/** Generous: the deadline, Node's check interval and a loaded machine's delays several times over. */
const BOUND_MS = 5 * HEADERS_TIMEOUT_MS + 3000;

let p: Platform;
let m: MessagingProject;

t.before(async () => {
  p = await platformFor(t, {
    fdLimit: FD_LIMIT,
    env: {
      EDGE_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      EDGE_REQUEST_TIMEOUT_MS: String(2 * HEADERS_TIMEOUT_MS),
      EDGE_MAX_CONNECTIONS: String(MAX_CONNECTIONS),
      SOCKET_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS),
      SOCKET_IDLE_TIMEOUT_S: String(SOCKET_IDLE_TIMEOUT_S),
    },
  });
  // The limit is the process's own, in force before any attack.
  const limits = readFileSync(`/proc/${p.child.pid}/limits`, 'utf8');
  t.match(limits, new RegExp(`^Max open files\\s+${FD_LIMIT}\\s+${FD_LIMIT}\\s`, 'm'), `the platform may open ${FD_LIMIT} files`);
  // Everything that needs the edge is set up before the attacks.
  m = await messagingProject(p);
});

interface Slow {
  /** Resolves when the connection closes: how long it stayed open, and what the server said. */
  closed: Promise<{ ms: number; said: string }>;
  stop(): void;
}

/** A connection that sends a request line, then one header line at a time, never finishing the headers. */
function slowHeaders(base: string, everyMs = 200): Slow {
  const url = new URL(base);
  const s = net.connect(Number(url.port), url.hostname);
  const started = Date.now();
  let said = '';
  let n = 0;
  s.on('data', (d) => (said += d));
  s.on('error', () => undefined);
  s.on('connect', () => s.write('GET /healthz HTTP/1.1\r\nHost: edge\r\n'));
  const drip = setInterval(() => {
    if (!s.destroyed && s.writable) s.write(`X-Drip-${n++}: ${'y'.repeat(8)}\r\n`);
  }, everyMs);
  const closed = new Promise<{ ms: number; said: string }>((resolve) =>
    s.on('close', () => {
      clearInterval(drip);
      resolve({ ms: Date.now() - started, said });
    }),
  );
  return {
    closed,
    stop: () => {
      clearInterval(drip);
      s.destroy();
    },
  };
}

const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
};

t.test('slow-loris on the edge: every connection is closed by the server after the header deadline', async (t) => {
  const clients = Array.from({ length: 20 }, () => slowHeaders(p.edge));
  const results = await Promise.all(
    clients.map((c) =>
      within(c.closed, BOUND_MS, 'server close').catch((err: Error) => {
        c.stop();
        return err;
      }),
    ),
  );
  const open = results.filter((r) => r instanceof Error);
  t.equal(open.length, 0, `all 20 closed by the server within ${BOUND_MS} ms`);
  const answered = results.filter((r) => !(r instanceof Error) && /^HTTP\/1\.1 408/.test(r.said));
  t.equal(answered.length, 20, 'each was answered 408 Request Timeout');
  t.ok(results.every((r) => r instanceof Error || r.ms >= HEADERS_TIMEOUT_MS * 0.9), 'none before the deadline: the header deadline closed them');
  t.equal((await http(p.edge, 'GET', '/healthz')).status, 200, 'the edge serves afterwards');
});

t.test("while the edge is slow-loris'd, the socket gateway accepts and serves a messaging session", async (t) => {
  // A sustained attack: ATTACKERS connections at all times, each replaced shortly after the server drops it.
  let attacking = true;
  let opened = 0;
  const live = new Set<Slow>();
  const attacker = async () => {
    while (attacking) {
      const c = slowHeaders(p.edge);
      opened++;
      live.add(c);
      await c.closed;
      live.delete(c);
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  const attackers = Array.from({ length: ATTACKERS }, attacker);
  // The process's open files, sampled through the attack: the edge's cap leaves the rest free.
  let peak = 0;
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, readdirSync(`/proc/${p.child.pid}/fd`).length);
    } catch {
      // a descriptor closed while being listed
    }
  }, 50);
  await new Promise((r) => setTimeout(r, 500));
  try {
    const step = 15_000;
    const token = await within(m.accessToken(), step, 'access token');
    const { sessionId } = await within(m.session({}, p.socket, token), step, 'session');
    const c = await within(connect(p.socket, { session_id: sessionId, access_token: token }), step, 'socket');
    try {
      await within(c.waitFor(is('EVENT_BATCH')), step, 'replay');
      c.send(T('REQUEST_SERVICE_AGENT_JOIN'));
      await within(c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting'), step, 'greeting');
      const before = c.flat().length;
      c.send(T('USER_MESSAGE'), { text: 'When are you open?' });
      const reply = await within(c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply', before), step, 'reply');
      t.match(reply.payload.text, /9am to 5pm/, 'the agent answered during the attack');
    } finally {
      await c.close();
    }
  } finally {
    clearInterval(sampler);
    attacking = false;
    for (const c of live) c.stop();
    await Promise.all(attackers);
  }
  t.ok(opened > ATTACKERS, `the attack was sustained (${opened} connections)`);
  t.ok(peak > 0 && peak <= FD_LIMIT - SPARE_FDS, `at most ${FD_LIMIT - SPARE_FDS} files open during the attack (${peak})`);
  t.equal((await http(p.edge, 'GET', '/healthz')).status, 200, 'the edge serves once the attack stops');
});

t.test('an answer before the body has all arrived closes the connection: no second, unasked-for 408 on it', async (t) => {
  const url = new URL(p.edge);
  const s = net.connect(Number(url.port), url.hostname);
  let said = '';
  s.on('data', (d) => (said += d));
  s.on('error', () => undefined);
  const started = Date.now();
  // No key (refused before the body is read), and 5 of the 100 bytes the request announces.
  s.on('connect', () => s.write('POST /v1/agents HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"nam'));
  const ms = await within(new Promise<number>((resolve) => s.on('close', () => resolve(Date.now() - started))), BOUND_MS, 'the connection to close');
  t.match(said, /^HTTP\/1\.1 401 /, 'answered 401 at once');
  t.match(said, /\r\nconnection: close\r\n/i, 'with Connection: close');
  t.equal(said.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, `one answer only: ${JSON.stringify(said.slice(0, 400))}`);
  t.ok(ms < 2 * HEADERS_TIMEOUT_MS, `closed after the answer (${ms} ms), not at the request deadline`);
  // A complete request keeps its connection.
  const kept = await http(p.edge, 'GET', '/healthz');
  t.not(kept.headers.get('connection'), 'close');
});

t.test('a body dribbled to the socket gateway is answered 408 and its connection closed', async (t) => {
  const token = await m.accessToken();
  const url = new URL(p.socket);
  const s = net.connect(Number(url.port), url.hostname);
  const started = Date.now();
  let said = '';
  s.on('data', (d) => (said += d));
  s.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => s.on('close', () => resolve(Date.now() - started)));
  s.write(`POST /api/v1/sessions HTTP/1.1\r\nHost: socket\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{`);
  const drip = setInterval(() => {
    if (s.writable) s.write(' ');
  }, 200);
  try {
    const ms = await within(closed, 4 * BODY_TIMEOUT_MS + 3000, 'server close');
    t.ok(ms >= BODY_TIMEOUT_MS * 0.9, 'not before the deadline');
  } finally {
    clearInterval(drip);
    s.destroy();
  }
  t.match(said, /^HTTP\/1\.1 408 /, '408 Request Timeout');
  t.match(said, /"error_code":"REQUEST_TIMEOUT"/, 'in the messaging error shape');
});

t.test('a WebSocket peer that answers no pings is closed after the socket idle timeout', async (t) => {
  const { sessionId, accessToken } = await m.session();
  const url = new URL(p.socket);
  // A bare TCP client: it completes the upgrade, then reads everything and answers nothing (no pongs).
  const s = net.connect(Number(url.port), url.hostname);
  let said = '';
  s.on('data', (d) => (said += d.toString('latin1')));
  s.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => s.on('close', () => resolve(Date.now())));
  s.write(
    `GET /ws?session_id=${sessionId}&access_token=${encodeURIComponent(accessToken)} HTTP/1.1\r\nHost: socket\r\n` +
      'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
  );
  try {
    await within(closed, 3 * SOCKET_IDLE_TIMEOUT_S * 1000 + 3000, 'server close');
  } finally {
    s.destroy();
  }
  t.match(said, /^HTTP\/1\.1 101 /, 'the upgrade was accepted');
  // What closed it is the idle mechanism: the server pinged (a ping frame starts with 0x89) and got no pong.
  t.ok(said.slice(said.indexOf('\r\n\r\n')).includes('\u0089'), 'the server pinged before closing');
});
