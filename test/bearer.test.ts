/**
 * `Authorization: Bearer <token>` is read by one rule on every route that takes it (docs/errors.md, "Bearer
 * credentials"; `platform/bearer.ts`): the admin API and the inspector's feed on the edge port, the Messaging API's
 * sessions step on the socket port. The scheme in any case, one or more spaces or tabs, the token, optional spaces
 * or tabs; nothing else. Each header is sent over a raw connection as the client wrote it (a no-break space goes as
 * the byte 0xA0), against a started platform.
 */
import { connect } from 'node:net';
import t from 'tap';
import fc from 'fast-check';
import { messagingProject, type MessagingProject } from './helpers/messaging.js';
import { platformFor, type Platform } from './helpers/platform.js';

let p: Platform;
let m: MessagingProject;
let accessToken: string;

t.before(async () => {
  p = await platformFor(t);
  m = await messagingProject(p);
  accessToken = await m.accessToken();
});

/**
 * One request over a raw connection, its head written in latin1 (one byte per character: `\u00a0` is the byte 0xA0;
 * `node:http` writes a head sent with a body as UTF-8); the status and the body. A WebSocket upgrade's 101 is
 * taken as the answer and the connection closed.
 */
function send(base: string, method: string, path: string, authorization: string, o: { body?: string; upgrade?: boolean } = {}): Promise<{ status: number; body: string }> {
  const url = new URL(base);
  const lines = [`${method} ${path} HTTP/1.1`, `Host: ${url.host}`, `Authorization: ${authorization}`];
  if (o.body !== undefined) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(o.body)}`);
  if (o.upgrade) lines.push('Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==');
  else lines.push('Connection: close');
  const bytes = Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), Buffer.from(o.body ?? '')]);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => socket.write(bytes));
    let text = '';
    const answer = () => ({ status: Number(text.split(' ')[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) });
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      text += d;
      if (text.startsWith('HTTP/1.1 101 ') && text.includes('\r\n\r\n')) socket.destroy();
    });
    socket.on('close', () => resolve(answer()));
    socket.on('error', reject);
  });
}

/**
 * Each family: what it answers a header in the Bearer form with its right token (a status past the credentials,
 * without side effects where the route allows) and one that is not in the form.
 */
const families = () => [
  {
    name: 'admin API',
    token: p.operatorToken,
    call: (authorization: string) => send(p.edge, 'GET', '/admin/v1/accounts', authorization),
    taken: 200,
    refused: { status: 401, body: /missing or invalid operator token/ },
  },
  {
    name: 'inspector feed',
    token: p.operatorToken,
    // A flag the feed refuses once the token has passed: 400, and no socket to close.
    call: (authorization: string) => send(p.edge, 'GET', '/admin/v1/inspector/actors/conversation/x/inspect?unmasked=zz', authorization, { upgrade: true }),
    taken: 400,
    refused: { status: 401, body: /missing or invalid operator token/ },
  },
  {
    name: 'Messaging API sessions',
    token: accessToken,
    // A body the step refuses once the token has passed: 400, and no session made.
    call: (authorization: string) => send(p.socket, 'POST', '/api/v1/sessions', authorization, { body: '{"platform":5}' }),
    taken: 400,
    refused: { status: 401, body: /MISSING_AUTHENTICATION_HEADERS/ },
  },
];

t.test('Bearer, two spaces, then the token: taken by every family, as with one space', async (t) => {
  for (const f of families()) {
    t.equal((await f.call(`Bearer ${f.token}`)).status, f.taken, `${f.name}: one space`);
    t.equal((await f.call(`Bearer  ${f.token}`)).status, f.taken, `${f.name}: two spaces`);
  }
  const session = await send(p.socket, 'POST', '/api/v1/sessions', `Bearer  ${accessToken}`, { body: '{}' });
  t.equal(session.status, 200, 'a session is made with two spaces');
  t.match(JSON.parse(session.body), { session_id: /^ses_/ });
});

t.test('fast-check: the scheme in any case, spaces and tabs around the token: taken by every family', async (t) => {
  const scheme = fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }).map((upper) => [...'bearer'].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join(''));
  const whitespace = (minLength: number) => fc.array(fc.constantFrom(' ', '\t'), { minLength, maxLength: 4 }).map((w) => w.join(''));
  for (const f of families()) {
    await fc.assert(
      fc.asyncProperty(scheme, whitespace(1), whitespace(0), async (s, between, after) => (await f.call(`${s}${between}${f.token}${after}`)).status === f.taken),
      { numRuns: 25 },
    );
    t.pass(`${f.name}: 25 forms taken`);
  }
});

t.test('anything else is not in Bearer form: refused alike by every family', async (t) => {
  for (const f of families()) {
    const refusals: Array<[string, string]> = [
      [`Bearer${f.token}`, 'no separator'],
      [`Bearer\u00a0${f.token}`, 'a no-break space (byte 0xA0) for the separator'],
      [`Bearer \u00a0${f.token}`, 'a no-break space after the space'],
      [`Bearer ${f.token} more`, 'a second word'],
      ['Bearer ', 'no token'],
      [`Basic ${f.token}`, 'another scheme'],
      [`${f.token}`, 'no scheme'],
    ];
    for (const [header, what] of refusals) {
      const got = await f.call(header);
      t.equal(got.status, f.refused.status, `${f.name}, ${what}: ${got.status}`);
      t.match(got.body, f.refused.body, `${f.name}, ${what}: the family's error`);
    }
  }
});

t.test('what the HTTP servers hand over differs at the ends of a value: uWebSockets.js drops bytes from 0x80 there', async (t) => {
  // The rule is one; the value it reads is not quite: uWS trims spaces, tabs and any byte from 0x80 at either end of a
  // header value (RFC 9110 trims spaces and tabs only, as Node's server does), so a no-break space after the
  // token, or any such byte before the scheme, is gone before the sessions step reads the header.
  for (const [header, what] of [[`Bearer ${p.operatorToken}\u00a0`, 'after the token'], [`\u00e9Bearer ${p.operatorToken}`, 'before the scheme']]) {
    t.equal((await send(p.edge, 'GET', '/admin/v1/accounts', header)).status, 401, `edge: a byte 0x80 or more ${what} is part of the value`);
  }
  for (const [header, what] of [[`Bearer ${accessToken}\u00a0`, 'after the token'], [`\u00e9Bearer ${accessToken}`, 'before the scheme']]) {
    t.equal((await send(p.socket, 'POST', '/api/v1/sessions', header, { body: '{"platform":5}' })).status, 400, `socket port: one ${what} is dropped by uWS`);
  }
});
