import t from 'tap';
import { request } from 'node:http';
import { connect } from 'node:net';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { logged } from './helpers/eventually.js';
import { http } from './helpers/http.js';
import { platformFor, removeDir, startPlatform } from './helpers/platform.js';
import { startNats } from './helpers/nats.js';
import { admin } from './helpers/tenants.js';

// This file takes 90 to 110 s on a 2-core machine (it starts and stops nine platform processes), within reach of the suite's 180 s per
// file: it asks the runner for more, so that a slower or busier machine does not fail it on time alone.
t.setTimeout(300_000);

/** The warning a process gets at start when other processes have its data directory's embedded store open. */
const SHARED_DATA_DIR_WARNING = /other processes have this DATA_DIR open/;

/** The warning a short `OPERATOR_TOKEN` gets at start. */
const WEAK_TOKEN_WARNING = /OPERATOR_TOKEN is shorter than 16 characters/;

t.test('healthz on both ports, request ids, OpenAPI document and page', async (t) => {
  const p = await startPlatform();
  t.teardown(() => removeDir(p.dataDir));
  const edge = await http(p.edge, 'GET', '/healthz');
  t.equal(edge.status, 200);
  t.same(edge.body, { status: 'ok' });
  const socket = await http(p.socket, 'GET', '/healthz');
  t.equal(socket.status, 200);
  t.same(socket.body, { status: 'ok' });
  t.ok(edge.headers.get('x-request-id'), 'a request id is assigned');
  t.equal((await http(p.edge, 'GET', '/healthz', { headers: { 'x-request-id': 'trace-123' } })).headers.get('x-request-id'), 'trace-123');

  const doc = await http(p.edge, 'GET', '/openapi.json');
  t.equal(doc.status, 200);
  t.match(doc.body.openapi, /^3\./);
  const paths = Object.keys(doc.body.paths);
  for (const path of [
    '/v1/agents',
    '/v1/agents/{agentId}/branches',
    '/v1/agents/{agentId}/branches/{branchId}/merge',
    '/v1/agents/{agentId}/branches/{branch}/behavior',
    '/v1/agents/{agentId}/branches/{branch}/knowledge-base/topics',
    '/v1/agents/{agentId}/deployments/publish',
    '/v1/agents/{agentId}/deployments/{deploymentId}/promote',
    '/v1/agents/{agentId}/deployments/{deploymentId}/rollback',
    '/v1/agents/{agentId}/real-time-configs/{config}/variables',
    '/admin/v1/keys',
  ]) t.ok(paths.includes(path), `OpenAPI has ${path}`);
  t.ok(doc.body.paths['/v1/agents'].post.requestBody, 'request bodies are documented');
  const page = await http(p.edge, 'GET', '/docs/');
  t.equal(page.status, 200);
  t.match(page.text, /swagger/i);
  t.equal(await p.stop(), 0);
});

t.test('SIGTERM drains: a request in flight finishes, new ones are refused, then exit 0', async (t) => {
  const p = await startPlatform();
  t.teardown(() => removeDir(p.dataDir));
  // a request whose body is still arriving when SIGTERM lands
  const body = JSON.stringify({ name: 'In flight' });
  const { port } = new URL(p.edge);
  const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/admin/v1/accounts', headers: {
      authorization: `Bearer ${p.operatorToken}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body),
    } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.write(body.slice(0, 5));
    setTimeout(() => {
      p.child.kill('SIGTERM');
      setTimeout(() => req.end(body.slice(5)), 300);
    }, 300);
  });
  const done = await answer;
  t.equal(done.status, 201, 'the in-flight request completed');
  t.equal(await p.stop(), 0, 'exit code 0');
  // what was acknowledged is there after a restart on the same data dir
  const again = await startPlatform({ dataDir: p.dataDir, env: { OPERATOR_TOKEN: p.operatorToken } });
  const list = await admin(again)('GET', '/accounts');
  t.same(list.body.data.map((a: any) => a.name), ['In flight'], 'the acknowledged write survived');
  t.equal(await again.stop(), 0);
});

t.test('SIGTERM drains: a request pipelined behind one in flight is served too, with Connection: close, not a 503', async (t) => {
  const p = await startPlatform();
  t.teardown(() => removeDir(p.dataDir));
  const body = JSON.stringify({ name: 'In flight' });
  const { port } = new URL(p.edge);
  const socket = connect(Number(port), '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (received += d));
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  const auth = `authorization: Bearer ${p.operatorToken}\r\n`;
  // The first request's headers and part of its body, so that it is in flight when SIGTERM lands.
  socket.write(`POST /admin/v1/accounts HTTP/1.1\r\nhost: 127.0.0.1\r\n${auth}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 5)}`);
  await new Promise((r) => setTimeout(r, 300));
  p.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  // The rest of its body and, in the same write, a second request behind it on the same connection.
  socket.write(`${body.slice(5)}GET /admin/v1/accounts HTTP/1.1\r\nhost: 127.0.0.1\r\n${auth}\r\n`);
  await closed;
  const statuses = [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
  t.same(statuses, [201, 200], 'both answered: the one in flight, then the one behind it');
  t.match(received.split('HTTP/1.1 200 ')[1] ?? '', /^connection: close\r$/im, 'the second with Connection: close, and the connection closed after it');
  t.equal(await p.stop(), 0, 'exit code 0');
});

t.test('the operator token is generated on first start, printed once, kept hashed', async (t) => {
  const first = await startPlatform({ generateToken: true });
  t.teardown(() => removeDir(first.dataDir));
  t.match(first.operatorToken, /^sbo_/);
  t.equal((await admin(first)('GET', '/accounts')).status, 200, 'the printed token works');
  await first.stop();
  const second = await startPlatform({ generateToken: true, dataDir: first.dataDir });
  t.notMatch(second.stdout(), /OPERATOR_TOKEN=/, 'not printed again');
  const again = await http(second.edge, 'GET', '/admin/v1/accounts', { headers: { authorization: `Bearer ${first.operatorToken}` } });
  t.equal(again.status, 200, 'and still valid after a restart');
  await second.stop();
});

t.test('a hand-written token file: a digest as sha256sum writes it is taken; a file that holds none stops the start, naming it', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-test-'));
  t.teardown(() => removeDir(dataDir));
  const token = 'sbo_handwritten-operator-token';
  writeFileSync(join(dataDir, 'operator-token.sha256'), `${createHash('sha256').update(token).digest('hex').toUpperCase()}  -\n`);
  const p = await startPlatform({ generateToken: true, dataDir });
  const r = await http(p.edge, 'GET', '/admin/v1/accounts', { headers: { authorization: `Bearer ${token}` } });
  t.equal(r.status, 200, 'the token whose digest the file holds');
  t.equal((await http(p.edge, 'GET', '/admin/v1/accounts', { headers: { authorization: 'Bearer other' } })).status, 401);
  await p.stop();
  for (const text of ['', 'garbage\n', '   \n']) {
    writeFileSync(join(dataDir, 'operator-token.sha256'), text);
    const failed = await startPlatform({ generateToken: true, dataDir }).catch((e: Error) => e);
    t.ok(failed instanceof Error, `${JSON.stringify(text)}: the start fails`);
    t.match(String(failed), /operator-token\.sha256 holds no SHA-256/, 'naming the file');
  }
});

t.test('an OPERATOR_TOKEN of any length works (operator.md sets none); a short one is warned about at start', async (t) => {
  for (const token of ['op', 'secret-token', 'a-long-enough-operator-token']) {
    const p = await platformFor(t, { env: { OPERATOR_TOKEN: token, LOG_LEVEL: 'warn' } });
    const r = await http(p.edge, 'GET', '/admin/v1/accounts', { headers: { authorization: `Bearer ${token}` } });
    t.equal(r.status, 200, `a ${token.length}-character token is the admin API's`);
    t.equal((await http(p.edge, 'GET', '/admin/v1/accounts', { headers: { authorization: `Bearer ${token}x` } })).status, 401, 'and only it');
    // Waited for only where expected: the serving line is written at once, the warning asynchronously (`logged`).
    const warned = token.length < 16 ? await logged(() => p.stdout(), WEAK_TOKEN_WARNING) : WEAK_TOKEN_WARNING.test(p.stdout());
    t.equal(warned, token.length < 16, token.length < 16 ? 'warned about' : 'no warning');
  }
});

t.test('SIGTERM with NATS gone: every drain step still runs, the store closes, exit 0', async (t) => {
  const nats = await startNats();
  const worker = await startPlatform({ roles: ['worker'], env: { NATS_URL: nats.url, LOG_LEVEL: 'info' } });
  t.teardown(() => removeDir(worker.dataDir));
  await nats.stop();
  await new Promise((r) => setTimeout(r, 500));
  t.equal(await worker.stop(), 0, 'exit code 0');
  t.match(worker.stdout(), /drained/, 'drained to the end');
  t.notMatch(worker.stderr(), /Unhandled|unhandled/, 'no unhandled rejection');
});

t.test('bad configuration stops the start with a message', async (t) => {
  const failed = await startPlatform({ env: { REGION: 'mars-1' } }).catch((e: Error) => e);
  t.ok(failed instanceof Error);
  t.match(String(failed), /REGION/);
});

t.test('roles: edge alone and socket alone; the second process on one DATA_DIR is warned about the embedded store', async (t) => {
  const edge = await startPlatform({ roles: ['edge'] });
  t.equal((await http(edge.edge, 'GET', '/healthz')).status, 200);
  t.equal(edge.socket, '');
  const socket = await startPlatform({ roles: ['socket'], dataDir: edge.dataDir, env: { OPERATOR_TOKEN: edge.operatorToken } });
  t.equal((await http(socket.socket, 'GET', '/healthz')).status, 200);
  t.equal(socket.edge, '');
  // docs/storage.md: with lmdb-js 3.5.6 a process opening the files while another commits can lose that commit.
  t.ok(await logged(() => socket.stdout(), SHARED_DATA_DIR_WARNING), 'the socket process is told the edge process has the directory open');
  const said = socket.stdout().split('\n').find((line) => SHARED_DATA_DIR_WARNING.test(line));
  t.same(JSON.parse(said!).pids, [edge.child.pid], 'naming its pid');
  t.notMatch(edge.stdout(), SHARED_DATA_DIR_WARNING, 'the first process (with its edge thread) found no other');
  t.equal(await edge.stop(), 0);
  t.equal(await socket.stop(), 0);
  removeDir(edge.dataDir);
});
