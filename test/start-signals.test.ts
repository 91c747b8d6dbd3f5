/**
 * SIGTERM or SIGINT at any point of the start exits 0 promptly, having closed what was open, as a drain would:
 * here while the store waits for a MongoDB server that accepts connections and never answers, and for one
 * that closes each (the driver waits out its server selection timeout in both), and while the platform's modules
 * still load. The wait for NATS is test/start-order.nats.test.ts's.
 */
import t from 'tap';
import { createServer, type Socket } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { removeDir, starting } from './helpers/platform.js';
import { MEDIA_ENV } from './helpers/voice.js';

/**
 * How long a stopped start may take to exit: under the driver's 30 s server selection wait, so that the exit is
 * the signal's doing, with room for a machine busy with other tests (7 s was not enough once in CI).
 */
const PROMPT_MS = 20_000;

/** Resolves with the exit code, or rejects once `ms` have passed. */
function exitWithin(exited: Promise<number | null>, ms: number): Promise<number | null> {
  return Promise.race([exited, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`not exited within ${ms} ms`)), ms).unref())]);
}

/**
 * A loopback server standing in for MongoDB: `silent` accepts connections and never answers, otherwise each is
 * closed as soon as it is accepted (as a server going down does). Resolves once a first connection came.
 */
async function mongoStandIn(t: { teardown(fn: () => unknown): void }, silent: boolean): Promise<{ port: number; reached: Promise<void> }> {
  const sockets = new Set<Socket>();
  let connected!: () => void;
  const reached = new Promise<void>((resolve) => (connected = resolve));
  const server = createServer((socket) => {
    socket.on('error', () => {});
    if (silent) sockets.add(socket);
    else socket.destroy();
    connected();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return { port: (server.address() as { port: number }).port, reached };
}

for (const [silent, signal, roles] of [
  [true, 'SIGTERM', []],
  [false, 'SIGINT', ['worker']],
] as const) {
  t.test(`${signal} while the store waits for a MongoDB server that ${silent ? 'never answers' : 'closes every connection'}: exit 0, promptly`, async (t) => {
    const mongo = await mongoStandIn(t, silent);
    const dataDir = mkdtempSync(join(tmpdir(), 'sb-start-signals-'));
    t.teardown(() => removeDir(dataDir));
    const env = { ...MEDIA_ENV, MONGODB_URL: `mongodb://127.0.0.1:${mongo.port}/sb`, LOG_LEVEL: 'info' };
    const s = starting(t, roles.join('+') || 'all roles', { roles: [...roles], dataDir, env });
    await mongo.reached;
    // A second into the wait.
    await new Promise((r) => setTimeout(r, 1000));
    const p = s.process()!;
    t.equal(p.child.exitCode, null, 'still waiting for MongoDB');
    p.child.kill(signal);
    t.equal(await exitWithin(p.exited, PROMPT_MS), 0, 'exits 0');
    t.match(p.stdout(), /"msg":"stopped while opening the store"/, 'saying why');
    t.notMatch(p.stdout(), /serving:/, 'it never served');
    t.equal(p.stderr(), '', 'nothing on stderr');
  });
}

t.test('SIGTERM while the platform\'s modules still load (seconds on a loaded machine): exit 0, promptly', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-start-signals-'));
  t.teardown(() => removeDir(dataDir));
  // A preload holds `platform/config.js` back for 2 s once it prints `loading`: the entry module has run by then,
  // the modules it imports next have not.
  const slowLoad = pathToFileURL(join(import.meta.dirname, 'fixtures', 'slow-load.js')).href;
  const held = 2000;
  const env = { ...MEDIA_ENV, LOG_LEVEL: 'info', NODE_OPTIONS: `--import=${slowLoad}`, SLOW_LOAD_MS: String(held) };
  const s = starting(t, 'all roles', { dataDir, env });
  const p = s.process()!;
  const deadline = Date.now() + 30_000;
  while (!p.stdout().includes('loading\n') && p.child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  t.match(p.stdout(), /^loading$/m, 'the modules are loading');
  p.child.kill('SIGTERM');
  t.equal(await exitWithin(p.exited, held + PROMPT_MS), 0, 'exits 0, not ended by the signal');
  t.equal(p.child.signalCode, null);
  t.match(p.stdout(), /"msg":"stopped while starting"/, 'saying why');
  t.notMatch(p.stdout(), /serving:/, 'it never served');
  t.equal(p.stderr(), '', 'nothing on stderr');
});
