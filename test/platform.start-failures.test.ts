/**
 * Start-ups that cannot serve: a port another process holds, a setting that cannot be used. Each stops the start
 * with exit 1 and a message naming the variable to change, before the process says it serves (operator.md).
 */
import t from 'tap';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { http } from './helpers/http.js';
import { platformFor, startPlatform } from './helpers/platform.js';

/** A TCP port free now on loopback: a platform given it binds it itself (one bound to port 0 shares with none). */
async function freePort(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return String(port);
}

/** `text` as a regular expression that matches it literally. */
const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

t.setTimeout(240_000);

t.test('SOCKET_PORT held by another platform\'s socket gateway: the second start exits 1 naming SOCKET_PORT, the first keeps the port alone', async (t) => {
  // Given a port, not 0: the kernel lets a second SO_REUSEPORT socket join one bound to a port it chose itself
  // from none, only to one bound to the port by number (as a deployment's is).
  const port = await freePort();
  const first = await platformFor(t, { env: { SOCKET_PORT: port } });
  t.equal(new URL(first.socket).port, port);
  // uWebSockets.js binds with SO_REUSEPORT unless told otherwise: the second gateway would bind the port too, and
  // the kernel would split the connections between the two deployments.
  const failed = await startPlatform({ env: { SOCKET_PORT: port } }).catch((e: Error) => e);
  if (!(failed instanceof Error)) t.teardown(() => failed.stop());
  t.ok(failed instanceof Error, 'the second start fails');
  t.match(String(failed), /platform exited with 1/, 'exit 1');
  t.match(String(failed), new RegExp(`SOCKET_PORT ${port} is in use on 127\\.0\\.0\\.1; set SOCKET_PORT to a free port`), 'naming the variable and the port');
  t.notMatch(String(failed), /serving:/, 'it never said it served');
  t.equal((await http(first.socket, 'GET', '/healthz')).status, 200, 'the first serves on');
});

t.test('EDGE_PORT held by another process: the start exits 1 naming EDGE_PORT and the port', async (t) => {
  const held = createServer();
  await new Promise<void>((resolve) => held.listen({ host: '127.0.0.1', port: 0, exclusive: true }, resolve));
  t.teardown(() => held.close());
  const port = (held.address() as { port: number }).port;
  // The edge in its own thread (the embedded default) and on the main thread: the thread's failure crosses to the main one.
  for (const thread of ['on', 'off']) {
    const failed = await startPlatform({ env: { EDGE_PORT: String(port), EDGE_THREAD: thread } }).catch((e: Error) => e);
    if (!(failed instanceof Error)) t.teardown(() => failed.stop());
    t.ok(failed instanceof Error, `EDGE_THREAD=${thread}: the start fails`);
    t.match(String(failed), /platform exited with 1/, 'exit 1');
    t.match(String(failed), new RegExp(`switchboard failed to start: Error: EDGE_PORT ${port} is in use on 127\\.0\\.0\\.1; set EDGE_PORT to a free port`), 'naming the variable and the port');
    t.notMatch(String(failed), /serving:/, 'it never said it served');
  }
});

t.test('a HOST that does not resolve, or is no address of this machine, stops the start: exit 1 naming HOST', async (t) => {
  // `.invalid` never resolves (RFC 6761); 192.0.2.1 (TEST-NET-1, RFC 5737) is no machine's own address.
  for (const [host, why] of [['no-such-host.invalid', 'does not resolve'], ['192.0.2.1', 'is not an address of this machine']]) {
    const failed = await startPlatform({ env: { HOST: host } }).catch((e: Error) => e);
    if (!(failed instanceof Error)) t.teardown(() => failed.stop());
    t.ok(failed instanceof Error, `HOST=${host}: the start fails`);
    t.match(String(failed), /platform exited with 1/, 'exit 1');
    t.match(String(failed), new RegExp(`switchboard failed to start: Error: HOST ${escapeRegExp(host)} ${why} \\([A-Z_]+\\); set HOST to an address of this machine`), 'naming the variable');
    t.notMatch(String(failed), /serving:/, 'it never said it served');
  }
});

t.test('a DATA_DIR under a regular file, or a regular file itself, stops the start: exit 1 naming DATA_DIR', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-data-dir-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'file');
  writeFileSync(file, 'not a directory');
  for (const [dataDir, why] of [[join(file, 'data'), 'cannot be created: part of its path is a file, not a directory \\(ENOTDIR\\)'], [file, 'is a file, not a directory \\(EEXIST\\)']]) {
    const failed = await startPlatform({ dataDir }).catch((e: Error) => e);
    if (!(failed instanceof Error)) t.teardown(() => failed.stop());
    t.ok(failed instanceof Error, `DATA_DIR=${dataDir}: the start fails`);
    t.match(String(failed), /platform exited with 1/, 'exit 1');
    t.match(String(failed), new RegExp(`switchboard failed to start: Error: DATA_DIR ${escapeRegExp(dataDir)} ${why}; set DATA_DIR to a directory this process can create and write`), 'naming the variable');
    t.notMatch(String(failed), /serving:/, 'it never said it served');
  }
});

t.test('a DATA_DIR that cannot be made under /proc stops the start at once: exit 1 naming DATA_DIR (Node\'s recursive mkdir never settles there)', async (t) => {
  const dataDir = `/proc/sb-no-such-dir-${process.pid}/data`;
  const failed = await startPlatform({ dataDir, readyTimeoutMs: 20_000 }).catch((e: Error) => e);
  if (!(failed instanceof Error)) t.teardown(() => failed.stop());
  t.ok(failed instanceof Error, 'the start fails');
  t.match(String(failed), /platform exited with 1/, 'exit 1, not a hang');
  t.match(String(failed), new RegExp(`switchboard failed to start: Error: DATA_DIR ${escapeRegExp(dataDir)} cannot be created or written \\(ENOENT\\); set DATA_DIR`), 'naming the variable');
});

t.test('/healthz is not 200 before the start has finished: with SIP_PORT taken, the edge never says ok, and the process exits 1', async (t) => {
  // The SIP port held over UDP: the media gateway, which starts after the edge (its thread) and the socket
  // gateway, fails the start.
  const held = createSocket('udp4');
  await new Promise<void>((resolve) => held.bind(0, '127.0.0.1', resolve));
  t.teardown(() => held.close());
  const sipPort = held.address().port;
  const edgePort = await freePort();
  let exited = false;
  const failed = startPlatform({ env: { EDGE_PORT: edgePort, SIP_PORT: String(sipPort), SIP_TLS_PORT: 'off' }, spawned: (p) => void p.exited.then(() => (exited = true)) }).catch((e: Error) => e);
  // Asked over and over from the spawn to the exit: whatever the edge answers while the start goes on.
  const answers = new Map<number, number>();
  while (!exited) {
    try {
      const r = await fetch(`http://127.0.0.1:${edgePort}/healthz`);
      await r.text();
      answers.set(r.status, (answers.get(r.status) ?? 0) + 1);
    } catch {
      await new Promise((resolve) => setImmediate(resolve)); // not listening (yet, or any more)
    }
  }
  const err = await failed;
  t.match(String(err), /platform exited with 1/, 'the start failed');
  t.match(String(err), new RegExp(`SIP_PORT ${sipPort} is in use`), 'on the SIP port');
  t.notOk(answers.has(200), `no 200 from /healthz meanwhile (answers: ${JSON.stringify([...answers])})`);
});
