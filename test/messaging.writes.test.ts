import t from 'tap';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { T, messagingProject, type MessagingProject } from './helpers/messaging.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';

/**
 * How the socket gateway writes to a socket, seen from a raw TCP client: which frames arrive in which read.
 * A user message's echo and the agent's answer are committed together and published within one turn of the
 * gateway's event loop; they go out in one write (one read here), not one each.
 */

let p: Platform;
let m: MessagingProject;

t.before(async () => {
  p = await startPlatform();
  m = await messagingProject(p);
});
t.teardown(async () => {
  await p.stop();
  removeDir(p.dataDir);
});

interface Frame {
  type: string;
  custom: unknown;
  /** The number of the read (TCP `data` event) that completed the frame. */
  read: number;
}

/** A WebSocket client over a plain TCP socket, keeping the read each server frame arrived in. */
async function rawSocket(sessionId: string, accessToken: string) {
  const url = new URL(p.socket);
  const sock = net.connect(Number(url.port), url.hostname);
  sock.setNoDelay(true);
  await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
  const key = randomBytes(16).toString('base64');
  sock.write(
    `GET /ws?session_id=${encodeURIComponent(sessionId)}&access_token=${encodeURIComponent(accessToken)} HTTP/1.1\r\n` +
      `Host: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
  );
  const frames: Frame[] = [];
  const waiters: Array<() => void> = [];
  let buffer = Buffer.alloc(0);
  let upgraded = false;
  let reads = 0;
  sock.on('data', (chunk: Buffer) => {
    reads++;
    buffer = Buffer.concat([buffer, chunk]);
    if (!upgraded) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = buffer.subarray(0, end).toString();
      if (!head.startsWith('HTTP/1.1 101')) throw new Error(`not upgraded: ${head}`);
      upgraded = true;
      buffer = buffer.subarray(end + 4);
    }
    // Server frames are unmasked text frames, none of them 64 KiB or more here.
    while (buffer.length >= 2) {
      let length = buffer[1] & 0x7f;
      let at = 2;
      if (length === 126) {
        if (buffer.length < 4) break;
        length = buffer.readUInt16BE(2);
        at = 4;
      }
      if (buffer.length < at + length) break;
      const e = JSON.parse(buffer.subarray(at, at + length).toString());
      buffer = buffer.subarray(at + length);
      const events = e.type === T('EVENT_BATCH') ? [e, ...e.payload.events] : [e];
      for (const x of events) frames.push({ type: x.type, custom: x.metadata?.custom ?? null, read: reads });
    }
    for (const w of waiters.splice(0)) w();
  });
  const waitFor = (match: (f: Frame) => boolean, what: string, timeoutMs = 20_000) =>
    new Promise<Frame>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
      const check = () => {
        const found = frames.find(match);
        if (found) {
          clearTimeout(timer);
          resolve(found);
        } else waiters.push(check);
      };
      check();
    });
  /** A masked text frame, as a client must send. */
  const send = (type: string, payload: object, custom?: object) => {
    const body = Buffer.from(JSON.stringify({ type, payload, ...(custom ? { metadata: { custom } } : {}) }));
    const mask = randomBytes(4);
    const head = body.length < 126 ? Buffer.from([0x81, 0x80 | body.length]) : Buffer.from([0x81, 0x80 | 126, body.length >> 8, body.length & 0xff]);
    const masked = Buffer.from(body.map((b, i) => b ^ mask[i % 4]));
    sock.write(Buffer.concat([head, mask, masked]));
  };
  return { frames, waitFor, send, close: () => sock.destroy() };
}

t.test("a user message's echo, the agent's thinking and its answer reach the socket in one write", async (t) => {
  const { sessionId, accessToken } = await m.session();
  const c = await rawSocket(sessionId, accessToken);
  t.teardown(c.close);
  await c.waitFor((f) => f.type === T('EVENT_BATCH'), 'the replay');
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'), {}, { client_event_id: 'join' });
  await c.waitFor((f) => f.type === T('SERVICE_AGENT_MESSAGE'), 'the greeting');
  const MESSAGES = 10;
  for (let i = 1; i <= MESSAGES; i++) {
    const id = `u${i}`;
    const ofThis = (type: string) => (f: Frame) => f.type === T(type) && (f.custom as { client_event_id?: string } | null)?.client_event_id === id;
    c.send(T('USER_MESSAGE'), { text: 'When are you open on Monday?' }, { client_event_id: id });
    const answer = await c.waitFor(ofThis('SERVICE_AGENT_MESSAGE'), `the answer to ${id}`);
    const echo = await c.waitFor(ofThis('USER_MESSAGE'), `the echo of ${id}`);
    const thinking = await c.waitFor(ofThis('SERVICE_AGENT_THINKING'), `the thinking for ${id}`);
    t.same([echo.read, thinking.read], [answer.read, answer.read], `${id}: echo, thinking and answer in one read`);
  }
});
