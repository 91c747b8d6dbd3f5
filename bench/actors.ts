/**
 * Actor runtime benchmark (issue: actor runtime). Prints, from one run on one machine:
 * - ask round-trip of a trivial actor (a counter INC: one durable snapshot per event) in-process and over
 *   NATS with the actors in a worker process, next to a bare NATS request/reply to an echo process (nats.js's
 *   own `request`) and the same request/reply through the platform's NATS transport;
 * - memory per live idle actor and per passivated actor;
 * - snapshot writes per second with group commit.
 * Run: `npm run build && node --expose-gc dist/bench/actors.js` (needs nats-server).
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ActorClient, startRuntime } from '../actors/mod.js';
import { connectNats, connectNatsTransport } from '../actors/transport/mod.js';
import { openStore } from '../store/mod.js';
import { startNats } from '../test/helpers/nats.js';
import { startPlatform } from '../test/helpers/platform.js';
import { cpuSeconds } from './proc.js';
import { closedLoop, fmt } from './stats.js';
import { WARMUP_S } from './warmup.js';

const DURATION_MS = Number(process.env.BENCH_MS ?? 5000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const ACTORS = 1000;
const IDLE_ACTORS = Number(process.env.BENCH_IDLE_ACTORS ?? 20_000);

/** Runs the closed loop of `op` for `WARMUP_S` seconds, unrecorded. */
async function warmUp(op: (i: number) => Promise<unknown>): Promise<void> {
  if (WARMUP_S > 0) await closedLoop(op, CONCURRENCY, WARMUP_S * 1000);
}

/** The CPU time (every thread) each party of a measured loop spent per operation: µs by party. */
type CpuShares = Array<[party: string, us: number]>;

/**
 * A closed loop of `op`, measured after the same loop has warmed up; with `parties` (name and pid; this
 * process is always one), also the CPU time each spent per operation of the measured loop.
 */
async function warmed(op: (i: number) => Promise<unknown>, parties: Array<[string, number | undefined]> = []): Promise<Awaited<ReturnType<typeof closedLoop>> & { cpu: CpuShares }> {
  await warmUp(op);
  const all: Array<[string, () => number]> = [['asking process', () => cpuSeconds(process.pid)], ...parties.map(([name, pid]): [string, () => number] => [name, () => cpuSeconds(pid)])];
  const before = all.map(([, read]) => read());
  const result = await closedLoop(op, CONCURRENCY, DURATION_MS);
  const ops = Math.max(1, result.perSecond * (DURATION_MS / 1000));
  const cpu: CpuShares = parties.length ? all.map(([name, read], i) => [name, ((read() - before[i]) * 1e6) / ops]) : [];
  return { ...result, cpu };
}

const gc = () => (globalThis as { gc?: () => void }).gc?.();
const heap = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

async function main() {
  if (!(globalThis as { gc?: unknown }).gc) console.warn('run with --expose-gc for exact memory figures');
  const nats = await startNats();
  const rows: Array<[string, string]> = [];
  const line = (name: string, r: { perSecond: number; p50: number; p99: number; errors: number; cpu?: CpuShares }) =>
    rows.push([
      name,
      `${fmt(r.perSecond)} /s   p50 ${fmt(r.p50, 2)} ms   p99 ${fmt(r.p99, 2)} ms${r.errors ? `   errors ${r.errors}` : ''}` +
        (r.cpu?.length ? `   CPU µs each: ${r.cpu.map(([party, us]) => `${party} ${fmt(us, 1)}`).join(', ')}` : ''),
    ]);

  // Baseline: bare NATS request/reply (nats.js's own `request`) to an echo responder in another process.
  const echo = fork(fileURLToPath(new URL('./nats-echo.js', import.meta.url)), [nats.url], { stdio: 'inherit' });
  await new Promise((r) => echo.once('message', r));
  // The roles' connect (credentials read from the URL, a server not up yet waited for), so only the request differs.
  const nc = await connectNats(nats.url, { name: 'bench-actors' });
  const payload = new Uint8Array(64);
  const bareResult = await warmed(() => nc.request('bench.echo', payload, { timeout: 5000 }), [['nats-server', nats.process.pid], ['echo process', echo.pid]]);
  line('bare NATS request/reply (echo process)', bareResult);
  await nc.close();
  // The same through the platform's transport (its outbox writes what a turn of the event loop sends at once).
  const bare = await connectNatsTransport(nats.url);
  const transportResult = await warmed(() => bare.request('bench.echo', payload, 5000));
  line('the same through the NATS transport', transportResult);

  // Actors over NATS: a worker process hosts them; this process asks.
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-bench-'));
  const worker = await startPlatform({ roles: ['worker'], dataDir, env: { NATS_URL: nats.url, SHARDS: '64', LOG_LEVEL: 'error' } });
  const natsClient = new ActorClient(bare, { shardCount: 64, timeoutMs: 10_000 });
  for (let i = 0; i < ACTORS; i++) await natsClient.ask('counter', `n${i}`, { type: 'INC' });
  const natsResult = await warmed((i) => natsClient.ask('counter', `n${i % ACTORS}`, { type: 'INC' }), [['nats-server', nats.process.pid], ['worker process', worker.child.pid]]);
  line('actor ask over NATS (worker process, durable)', natsResult);
  await worker.stop();

  // Actors in-process: the embedded default.
  const inprocDir = mkdtempSync(join(tmpdir(), 'sb-bench-'));
  const store = await openStore({ dataDir: inprocDir });
  const rt = await startRuntime({ store, worker: true, shardCount: 64, leaseTtlMs: 3000, passivateAfterMs: 3_600_000, askTimeoutMs: 10_000 });
  for (let i = 0; i < ACTORS; i++) await rt.client.ask('counter', `i${i}`, { type: 'INC' });
  const inprocAsk = (i: number) => rt.client.ask('counter', `i${i % ACTORS}`, { type: 'INC' });
  // Warmed apart from the measured loop: the commit counts are taken between the two.
  await warmUp(inprocAsk);
  const before = rt.host!.commitStats;
  const inprocResult = await closedLoop(inprocAsk, CONCURRENCY, DURATION_MS);
  const after = rt.host!.commitStats;
  line('actor ask in-process (durable)', inprocResult);
  const writes = after.writes - before.writes;
  const batches = after.batches - before.batches;

  // Memory: activate IDLE_ACTORS fresh actors, measure, passivate them all, measure again.
  await rt.host!.passivateIdle();
  const base = heap();
  for (let i = 0; i < IDLE_ACTORS; i += 500) {
    await Promise.all(Array.from({ length: 500 }, (_, j) => rt.client.ask('counter', `idle${i + j}`, { type: 'INC' })));
  }
  const live = heap();
  const liveCount = rt.host!.liveActors;
  await rt.host!.passivateIdle();
  const passivated = heap();

  await rt.stop();
  await store.close();
  await bare.close();
  echo.kill();
  await nats.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(inprocDir, { recursive: true, force: true });

  const ratio = natsResult.perSecond / bareResult.perSecond;
  rows.push(['actor over NATS / bare NATS throughput', `${fmt(ratio * 100, 1)} % (target ≥ 50 %)`]);
  rows.push(['memory per live idle actor', `${fmt((live - base) / liveCount)} bytes over ${fmt(liveCount)} actors (target < 5 KB)`]);
  rows.push(['memory per passivated actor', `${fmt(Math.max(0, passivated - base) / IDLE_ACTORS, 1)} bytes (live after passivation: ${rt.host!.liveActors})`]);
  rows.push(['snapshot writes with group commit', `${fmt(writes / (DURATION_MS / 1000))} /s in ${fmt(batches)} commits (${fmt(writes / Math.max(1, batches), 1)} writes per commit, one commit every ${fmt(DURATION_MS / Math.max(1, batches), 1)} ms)`]);
  // A closed loop of durable asks runs at most concurrency / commit time: every ask waits for its commit.
  rows.push(['ceiling of durable asks at this concurrency', `${fmt(CONCURRENCY / (DURATION_MS / Math.max(1, batches) / 1000))} /s (concurrency / time per commit)`]);

  console.log(`\nactor runtime benchmark — ${new Date().toISOString().slice(0, 10)}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}, concurrency ${CONCURRENCY}, ${DURATION_MS} ms per run after ${WARMUP_S} s of warm-up`);
  const width = Math.max(...rows.map(([n]) => n.length));
  for (const [name, value] of rows) console.log(`  ${name.padEnd(width)}  ${value}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
