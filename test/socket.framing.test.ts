/**
 * How the socket gateway's port reads a request's framing, over raw connections to a started platform as an
 * HTTP client or a proxy would send it: `Host`, `Expect`, `Content-Encoding` and `Transfer-Encoding`, which the
 * edge refuses before any route (`test/edge.refusals.test.ts`). What uWebSockets.js does before any handler of
 * the gateway runs (a request without Host, or with both Content-Length and Transfer-Encoding: the connection
 * closed with no answer) is checked as it is observable; the rest is refused in the Messaging API's error shape.
 */
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
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

const shape = (code: string, message: string, detail?: string) => ({
  success: false,
  error: message,
  error_code: code,
  error_message: message,
  ...(detail ? { error_detail: detail } : {}),
  data: null,
});

/** A request's head, with the socket port's `Host`. */
const head = (line: string, headers: string[]) => `${line} HTTP/1.1\r\nHost: ${new URL(p.socket).host}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`;

/** Every status of `text`, in order (an answer's body follows the one before it on the same line). */
const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((x) => Number(x[1]));

/** Whether `text` holds a whole answer: its head, and as many bytes after it as its Content-Length says. */
function whole(text: string): boolean {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return false;
  const length = /\r\ncontent-length: (\d+)\r\n/i.exec(text.slice(0, end + 2));
  return length !== null && text.length >= end + 4 + Number(length[1]);
}

/**
 * Sends `request`, waits for its whole answer, then sends another request (`GET /healthz` with `Connection:
 * close`) on the same connection; everything received once the connection is closed. A refusal that closes
 * the connection leaves the second request unanswered.
 */
async function thenAnother(request: string): Promise<string> {
  const c = await open();
  c.write(request);
  await c.until(whole);
  c.write(head('GET /healthz', ['Connection: close']));
  return c.closed;
}

t.test('an HTTP/1.1 request without Host: uWebSockets.js closes the connection before any handler, with no answer', async (t) => {
  const token = await m.accessToken();
  // RFC 9112 3.2 asks for a 400; no handler of the gateway is called, so none can write it (gateway/socket/framing.ts).
  const session = await raw(`POST /api/v1/sessions HTTP/1.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`);
  t.equal(session, '', 'POST /api/v1/sessions without Host: closed, nothing written');
  t.equal(await raw('GET /healthz HTTP/1.1\r\nUser-Agent: probe\r\n\r\n'), '', 'GET /healthz without Host: closed, nothing written');
  // The same requests with a Host are served: the port is up.
  t.equal(answer(await raw(head('GET /healthz', ['Connection: close']))).status, 200);
});

t.test('Expect: 100-continue is met (the 100 before the body is sent); any other expectation is 417, the connection closed', async (t) => {
  const token = await m.accessToken();
  const body = '{"streaming_enabled":true}';
  const c = await open();
  c.write(head('POST /api/v1/sessions', [`Authorization: Bearer ${token}`, 'Content-Type: application/json', `Content-Length: ${body.length}`, 'Expect: 100-continue', 'Connection: close']));
  await c.until((text) => text.startsWith('HTTP/1.1 100 Continue\r\n\r\n'));
  c.write(body);
  const served = answer(await c.closed);
  t.equal(served.status, 200, 'the body sent after the 100 is read');
  t.match(served.body, { session_id: /^ses_/ });

  // Another spelling of 100-continue is met too, without the interim answer (uWS writes it for the lower case only).
  const mixed = await raw(head('POST /api/v1/sessions', [`Authorization: Bearer ${token}`, 'Content-Length: 2', 'Expect: 100-Continue', 'Connection: close']) + '{}');
  t.equal(answer(mixed).status, 200, 'Expect: 100-Continue');

  const message = 'the gateway meets no expectation but 100-continue';
  const requests: Array<[string, string[]]> = [
    ['POST /api/v1/sessions', [`Authorization: Bearer ${token}`, 'Content-Length: 2']],
    ['POST /api/v1/access-token', [`X-Token: ${m.connectorToken}`, 'X-Host: example.com', 'Content-Length: 2']],
    ['GET /healthz', []],
    ['GET /widget.js', []],
    ['GET /ws', []],
    ['GET /no-such-page', []],
    ['OPTIONS /api/v1/sessions', []],
  ];
  for (const [line, headers] of requests) {
    for (const expect of ['foo', '100-continue, foo']) {
      const got = await thenAnother(head(line, [...headers, `Expect: ${expect}`]) + (line.startsWith('POST') ? '{}' : ''));
      t.same(statuses(got), [417], `${line}, Expect: ${expect}: one answer, then the connection closed`);
      t.same(answer(got), { status: 417, body: shape('EXPECTATION_FAILED', message, `Expect: ${expect}`) }, `${line}, Expect: ${expect}`);
      t.match(got, /\r\naccess-control-allow-origin: \*\r\n/i, 'with the CORS header of every Messaging API answer');
    }
  }
  // A WebSocket upgrade of the socket path is refused alike, before its handshake's checks.
  const { sessionId } = await m.session();
  const c2 = await open();
  c2.write(head(`GET /ws?session_id=${sessionId}&access_token=${token}`, ['Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==', 'Expect: foo']));
  const upgradeHead = await c2.until((text) => text.includes('\r\n\r\n'));
  t.match(upgradeHead, /^HTTP\/1\.1 417 /, 'an upgrade with Expect: foo is 417, not 101');
  if (/^HTTP\/1\.1 417 /.test(upgradeHead)) t.same(answer(await c2.closed), { status: 417, body: shape('EXPECTATION_FAILED', message, 'Expect: foo') });
  else c2.end();
});

t.test('a body with a content coding is 400 REQUEST_PARSE_ERROR naming the coding, once the credentials have passed', async (t) => {
  const token = await m.accessToken();
  const detail = (coding: string) => `Content-Encoding ${coding} is not supported: send the body without a content coding`;
  const parseError = (coding: string) => ({ status: 400, body: shape('REQUEST_PARSE_ERROR', 'Error parsing request', detail(coding)) });
  const post = (path: string, headers: string[], body: Buffer) =>
    raw(Buffer.concat([Buffer.from(head(`POST ${path}`, [...headers, `Content-Length: ${body.length}`, 'Connection: close'])), body])).then(answer);
  const session = (headers: string[], body: Buffer) => post('/api/v1/sessions', [`Authorization: Bearer ${token}`, 'Content-Type: application/json', ...headers], body);

  // Compressed bytes were parsed as JSON (a 400 that did not say why); a plain body labelled br was taken as if unlabelled.
  t.same(await session(['Content-Encoding: gzip'], gzipSync('{"streaming_enabled":true}')), parseError('gzip'), 'a gzip body');
  t.same(await session(['Content-Encoding: br'], Buffer.from('{}')), parseError('br'), 'a plain body labelled br');
  t.same(await session(['Content-Encoding: identity', 'Content-Encoding: Deflate'], Buffer.from('{}')), parseError('deflate'), 'a coding on a second header line');
  t.same(await session(['Content-Encoding: identity, x-unknown'], Buffer.from('{}')), parseError('x-unknown'), 'a coding after identity');
  const token2 = await post('/api/v1/access-token', [`X-Token: ${m.connectorToken}`, 'X-Host: example.com', 'Content-Encoding: gzip'], gzipSync('{}'));
  t.same(token2, parseError('gzip'), 'the access token step alike');

  t.equal((await session(['Content-Encoding: identity'], Buffer.from('{}'))).status, 200, 'identity is no coding');
  t.equal((await session(['Content-Encoding: gzip'], Buffer.alloc(0))).status, 200, 'an empty body has no coding to undo');
  const badToken = await post('/api/v1/sessions', ['Authorization: Bearer nope', 'Content-Encoding: gzip'], gzipSync('{}'));
  t.equal(badToken.status, 401, 'credentials first: a bad token is 401 whatever the body');
  const badConnector = await post('/api/v1/access-token', ['X-Token: nope', 'X-Host: example.com', 'Content-Encoding: gzip'], gzipSync('{}'));
  t.equal(badConnector.status, 401, 'and an unknown connector');
});

t.test('a transfer coding other than chunked is 400, the connection closed; Content-Length with Transfer-Encoding is closed by uWS', async (t) => {
  const token = await m.accessToken();
  const detail = (coding: string) => `Transfer-Encoding ${coding} is not supported: chunked is the only transfer coding taken`;
  const refused = (coding: string) => ({ status: 400, body: shape('REQUEST_PARSE_ERROR', 'Error parsing request', detail(coding)) });
  const chunks = (body: string) => `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  const sessions = (te: string) => head('POST /api/v1/sessions', [`Authorization: Bearer ${token}`, 'Content-Type: application/json', `Transfer-Encoding: ${te}`]);

  // uWS undoes the chunks of any Transfer-Encoding and none of its other codings: gzip, chunked was served.
  const gzipChunked = await thenAnother(sessions('gzip, chunked') + chunks('{}'));
  t.same(answer(gzipChunked), refused('gzip'), 'gzip, chunked: the gzip is not undone');
  t.same(statuses(gzipChunked), [400], 'and the connection closed');
  // One not ending in chunked has a body uWS would read as chunks: refused on its head, before any body is sent
  // (one sent with the head is read as chunks, and uWS closes the connection when they are not).
  for (const te of ['gzip', 'identity', 'chunked, gzip']) {
    const got = await thenAnother(sessions(te));
    t.same(answer(got), refused(te.split(', ').find((x) => x !== 'chunked')!), `Transfer-Encoding: ${te}`);
    t.same(statuses(got), [400], `Transfer-Encoding: ${te}: the connection closed`);
  }
  const probe = await thenAnother(head('GET /healthz', ['Transfer-Encoding: gzip']));
  t.same(answer(probe), refused('gzip'), 'on every path');
  t.same(statuses(probe), [400], 'on every path: the connection closed');
  t.same(statuses(await thenAnother(sessions('chunked') + chunks('{}'))), [200, 200], 'chunked alone is served, and the connection kept');

  // RFC 9112 6.3: a message with both is a smuggling attempt; uWS closes the connection before any handler.
  const both = await raw(head('POST /api/v1/sessions', [`Authorization: Bearer ${token}`, 'Content-Length: 2', 'Transfer-Encoding: chunked']) + chunks('{}'));
  t.equal(both, '', 'Content-Length and Transfer-Encoding: closed, nothing written');
});

t.test('a refused HEAD is answered without a body, with the GET\'s length, and its connection closed', async (t) => {
  const token = await m.accessToken();
  const refusals: Array<[string, string[], number]> = [
    ['/healthz', ['Expect: foo'], 417],
    ['/healthz', ['Transfer-Encoding: gzip'], 400],
    ['/api/v1/sessions', [`Authorization: Bearer ${token}`, 'Transfer-Encoding: gzip'], 400],
    ['/widget.js', ['Expect: 100-continue, foo'], 417],
  ];
  for (const [path, headers, status] of refusals) {
    const get = answer(await raw(head(`GET ${path}`, headers)));
    t.equal(get.status, status, `GET ${path} with ${headers.at(-1)}: refused`);
    const c = await open();
    c.write(head(`HEAD ${path}`, headers));
    const headText = await c.until((text) => text.includes('\r\n\r\n'));
    // Then what a body ending in a last chunk looks like, and a request: uWS reads any Transfer-Encoding as
    // chunked, so on a connection kept open the `0` chunk ended the refused HEAD's body and the GET was served.
    c.write(`0\r\n\r\n${head('GET /healthz', ['Connection: close'])}`);
    const got = await c.closed;
    t.same(statuses(got), [status], `HEAD ${path} with ${headers.at(-1)}: one answer, then the connection closed`);
    t.equal(got.slice(got.indexOf('\r\n\r\n') + 4), '', 'no body');
    const length = /\r\ncontent-length: (\d+)\r\n/i.exec(headText)?.[1];
    t.equal(Number(length), Buffer.byteLength(JSON.stringify(get.body)), 'the length of the GET\'s answer');
    t.match(headText, /\r\naccess-control-allow-origin: \*\r\n/i);
  }
  // A HEAD that is not refused keeps its connection (test/socket.head.test.ts).
  const c = await open();
  c.write(head('HEAD /healthz', []));
  await c.until((text) => text.includes('\r\n\r\n'));
  c.write(head('GET /healthz', ['Connection: close']));
  t.same(statuses(await c.closed), [200, 200], 'HEAD then GET on one connection');
});

t.test('an HTTP/1.0 request is not answered: uWebSockets.js writes nothing and closes the connection at its idle timeout', async (t) => {
  // No handler of the gateway runs (docs/messaging.md, HTTP framing): nothing can answer it, not even a 505.
  const host = new URL(p.socket).host;
  const requests = [
    `GET /healthz HTTP/1.0\r\nHost: ${host}\r\n\r\n`,
    'GET /healthz HTTP/1.0\r\n\r\n',
    `GET /widget.js HTTP/1.0\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`,
    `HEAD /healthz HTTP/1.0\r\nHost: ${host}\r\n\r\n`,
    `POST /api/v1/access-token HTTP/1.0\r\nHost: ${host}\r\nX-Token: ${m.connectorToken}\r\nX-Host: example.com\r\nContent-Length: 2\r\n\r\n{}`,
  ];
  const got = await Promise.all(requests.map((r) => raw(r)));
  t.same(got, requests.map(() => ''), 'nothing written; the gateway closed each connection');
});
