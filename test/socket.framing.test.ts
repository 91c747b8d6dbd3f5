/**
 * How the socket gateway's port reads a request's framing, over raw connections to a started platform as an
 * HTTP client or a proxy would send it: `Host`, `Expect`, `Content-Encoding` and `Transfer-Encoding`, which the
 * edge refuses before any route (`test/edge.refusals.test.ts`). What uWebSockets.js does before any handler of
 * the gateway runs (a request without Host: the connection closed with no answer) is checked as it is observable.
 */
import { connect } from 'node:net';
import t from 'tap';
import { messagingProject, type MessagingProject } from './helpers/messaging.js';
import { platformFor, type Platform } from './helpers/platform.js';

let p: Platform;
let m: MessagingProject;

t.before(async () => {
  p = await platformFor(t);
  m = await messagingProject(p);
});

/** An open connection to the socket port: what it has received so far, whether the gateway closed it. */
interface Raw {
  write(data: string | Buffer): void;
  /** Resolves once the received text passes `done` (rejects if the connection closes first). */
  until(done: (text: string) => boolean): Promise<string>;
  /** Resolves with everything received, once the gateway has closed the connection. */
  closed: Promise<string>;
  end(): void;
}

function open(): Promise<Raw> {
  const url = new URL(p.socket);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let text = '';
    const waiters: Array<() => void> = [];
    const closed = new Promise<string>((done) => socket.on('close', () => done(text)));
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      text += d;
      for (const w of waiters.splice(0)) w();
    });
    socket.on('close', () => {
      for (const w of waiters.splice(0)) w();
    });
    socket.on('error', () => undefined);
    socket.once('connect', () =>
      resolve({
        write: (data) => socket.write(data),
        until: (done) =>
          new Promise((ok, fail) => {
            const check = () => {
              if (done(text)) return ok(text);
              if (socket.destroyed || socket.readableEnded) return fail(new Error(`closed first: ${JSON.stringify(text)}`));
              waiters.push(check);
            };
            check();
          }),
        closed,
        end: () => socket.end(),
      }),
    );
    socket.once('error', reject);
  });
}

/** Sends one request (with `Connection: close` when the gateway is to answer it) and returns all it got back. */
async function raw(request: string | Buffer): Promise<string> {
  const c = await open();
  c.write(request);
  return c.closed;
}

/** The status and parsed body of the first answer in `text` (after any `100 Continue`). */
function answer(text: string): { status: number; body: any } {
  const first = text.startsWith('HTTP/1.1 100 ') ? text.slice(text.indexOf('\r\n\r\n') + 4) : text;
  const end = first.indexOf('\r\n\r\n');
  const length = /\r\ncontent-length: (\d+)\r\n/i.exec(first.slice(0, end + 2));
  const body = first.slice(end + 4, length ? end + 4 + Number(length[1]) : undefined);
  let parsed: unknown = body;
  try {
    parsed = JSON.parse(body);
  } catch {
    /* not JSON */
  }
  return { status: Number(first.split(' ')[1]), body: parsed };
}

/** A request's head, with the socket port's `Host`. */
const head = (line: string, headers: string[]) => `${line} HTTP/1.1\r\nHost: ${new URL(p.socket).host}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`;

t.test('an HTTP/1.1 request without Host: uWebSockets.js closes the connection before any handler, with no answer', async (t) => {
  const token = await m.accessToken();
  // RFC 9112 3.2 asks for a 400; no handler of the gateway is called, so none can write it (docs/messaging.md, HTTP framing).
  const session = await raw(`POST /api/v1/sessions HTTP/1.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`);
  t.equal(session, '', 'POST /api/v1/sessions without Host: closed, nothing written');
  t.equal(await raw('GET /healthz HTTP/1.1\r\nUser-Agent: probe\r\n\r\n'), '', 'GET /healthz without Host: closed, nothing written');
  // The same requests with a Host are served: the port is up.
  t.equal(answer(await raw(head('GET /healthz', ['Connection: close']))).status, 200);
});
