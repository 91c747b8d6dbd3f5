/**
 * HEAD on the socket gateway's port, over a raw keep-alive connection as a probe or a load balancer sends it:
 * the health check and the browser pages answer the GET's status and headers, anything else its 404, and none
 * sends a body (one would be read as the start of the next response on the same connection).
 */
import { connect } from 'node:net';
import t from 'tap';
import { platformFor, type Platform } from './helpers/platform.js';

let p: Platform;

t.before(async () => {
  p = await platformFor(t);
});

/** Sends `requests` on one connection and returns every byte the gateway wrote until it went quiet. */
function exchange(base: string, requests: string[]): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(requests.map((r) => `${r} HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`).join(''));
    });
    let data = '';
    let quiet: NodeJS.Timeout | undefined;
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      data += chunk;
      clearTimeout(quiet);
      // Every answer is in once the last request's head is; a body after a HEAD would come with it.
      if ((data.match(/HTTP\/1\.1 /g) ?? []).length >= requests.length) quiet = setTimeout(() => socket.end(), 300);
    });
    socket.on('end', () => resolve(data));
    socket.on('close', () => resolve(data));
    socket.on('error', reject);
  });
}

/** Splits raw answers by their status lines: [status, headers, what follows the head]. */
function answers(raw: string): Array<{ status: number; headers: Map<string, string>; rest: string }> {
  return raw
    .split(/(?=HTTP\/1\.1 \d{3} )/)
    .filter(Boolean)
    .map((part) => {
      const [head, rest = ''] = part.split('\r\n\r\n');
      const [statusLine, ...lines] = head.split('\r\n');
      const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      return { status: Number(statusLine.split(' ')[1]), headers, rest };
    });
}

t.test('HEAD answers the GET\'s status and length and no body, on a keep-alive connection', async (t) => {
  // The socket path without an upgrade is the plain GET's handshake answer (400 parameters, 401 credentials).
  const paths = ['/healthz', '/widget.js', '/widget.css', '/desk', '/desk.js', '/demo', '/no-such-page', '/ws', '/ws?session_id=ses_x&access_token=garbage'];
  for (const path of paths) {
    const get = await fetch(new URL(path, p.socket));
    const body = Buffer.from(await get.arrayBuffer());
    // The HEAD, then a GET of the health check on the same connection: it must read as its own answer.
    const raw = await exchange(p.socket, [`HEAD ${path}`, 'GET /healthz']);
    const [head, next, ...more] = answers(raw);
    t.equal(head.status, get.status, `HEAD ${path}: the GET's status`);
    t.equal(head.headers.get('content-type'), get.headers.get('content-type'), `HEAD ${path}: the GET's type`);
    t.equal(Number(head.headers.get('content-length')), body.length, `HEAD ${path}: the GET's length`);
    t.equal(head.rest, '', `HEAD ${path}: no body`);
    t.equal(next?.status, 200, `after HEAD ${path}, the next answer on the connection is read as its own`);
    t.equal(next?.rest, '{"status":"ok"}');
    t.equal(more.length, 0);
  }
});
