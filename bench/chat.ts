/**
 * Chat API benchmark (issue: conversations): turns per second and p50/p99 latency with 64 concurrent
 * conversations (one keep-alive connection each, each playing 20-turn conversations), embedded and over NATS, next to a bare
 * Fastify route in the same run. Every turn is durable (snapshot and record written) before its reply, so the run also
 * measures a bare durable route (`bare-durable.ts`, issue 12: per request one store read, a 400-byte append and a 3 KB
 * record rewrite in one flushed group commit, in its own process), the floor under any durable turn.
 * Each row also shows the CPU time its server processes spent per request (from /proc, Linux): on a shared
 * machine the rate moves with the neighbours' load, the CPU cost much less.
 * Run: `npm run build && node dist/bench/chat.js` (needs nats-server for the NATS row). `BENCH_TIMINGS=1`
 * runs the embedded platform with `SB_TIMINGS=1` and prints its per-step timings.
 */
import { fork } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { chatProject } from '../test/helpers/chat.js';
import { chatLoad } from './chat-load.js';
import { startCluster } from '../test/helpers/cluster.js';
import { removeDir, startPlatform } from '../test/helpers/platform.js';
import { cpuSeconds } from './proc.js';
import { fmt } from './stats.js';
import { WARMUP_S } from './warmup.js';

const DURATION_S = Number(process.env.BENCH_S ?? 10);
const CONVERSATIONS = 64;
/**
 * The Chat API's rate limits lifted: the load is one key of one project, and the default limits (2,000 turns/s
 * per key) would answer 429 to what the benchmark measures.
 */
const UNLIMITED = { CHAT_RATE_PER_KEY: '1000000', CHAT_RATE_PER_PROJECT: '1000000' };

type Row = { name: string; rps: number; p50: number; p99: number; errors: number; cpuUs?: number };

/** CPU time (user + system, ms) a process has used so far, or NaN where /proc is not readable. */
const cpuMs = (pid: number | undefined): number => cpuSeconds(pid) * 1000;

/** Runs `work` and adds the CPU the processes `pids` spent on it, per request, in µs. */
async function measured<R extends { rps: number; total: number }>(pids: Array<number | undefined>, work: () => Promise<R>): Promise<R & { cpuUs: number }> {
  const before = pids.map(cpuMs);
  const result = await work();
  const spent = pids.map(cpuMs).reduce((sum, after, i) => sum + after - before[i], 0);
  return { ...result, cpuUs: (spent * 1000) / Math.max(1, result.total) };
}

async function load(url: string, headers: Record<string, string>, bodies: string[], duration = DURATION_S): Promise<Omit<Row, 'name'> & { total: number }> {
  let i = 0;
  const result = await autocannon({
    url,
    method: 'POST',
    connections: CONVERSATIONS,
    duration,
    headers: { 'content-type': 'application/json', ...headers },
    // One conversation per connection: its turns are sequential, as a chat user's are.
    setupClient: (client: { setBody: (b: string) => void }) => client.setBody(bodies[i++ % bodies.length]),
  } as autocannon.Options);
  return { rps: result.requests.average, total: result.requests.total, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.non2xx };
}

/**
 * Each connection plays conversations of TURNS turns: a create (the opening turn), then TURNS - 1 responds
 * on that conversation, then a new one, as chat users come and go. Rates count every turn.
 */
const TURNS = Number(process.env.BENCH_TURNS ?? 20);

async function chatRow(name: string, edge: Parameters<typeof chatProject>[0], pids: Array<number | undefined>): Promise<Row> {
  const c = await chatProject(edge, { name });
  const run = (duration: number) => chatLoad(edge.edge, c, { connections: CONVERSATIONS, turns: TURNS, duration });
  if (WARMUP_S > 0) await run(WARMUP_S);
  const { result, cpuUs } = await measured(pids, async () => {
    const result = await run(DURATION_S);
    return { result, rps: result.requests.average, total: result.requests.total };
  });
  return { name, rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.non2xx, cpuUs };
}

async function main() {
  const rows: Row[] = [];
  const bare = fork(fileURLToPath(new URL('./bare-fastify.js', import.meta.url)));
  const { port } = await new Promise<{ port: number }>((r) => bare.once('message', (m) => r(m as { port: number })));
  const body = JSON.stringify({ conversation_id: 'x', message: 'When do you open on Monday?' });
  if (WARMUP_S > 0) await load(`http://127.0.0.1:${port}/bare`, {}, [body], WARMUP_S);
  rows.push({ name: 'bare Fastify route (own process)', ...(await measured([bare.pid], () => load(`http://127.0.0.1:${port}/bare`, {}, [body]))) });
  bare.kill();

  // The floor a durable turn stands on: a read, an append and a record rewrite in one flushed group commit.
  const durable = fork(fileURLToPath(new URL('./bare-durable.js', import.meta.url)));
  const durablePort = await new Promise<number>((r) => durable.once('message', (m) => r((m as { port: number }).port)));
  const durableBodies = Array.from({ length: CONVERSATIONS }, (_, i) => JSON.stringify({ conversation_id: `c${i}`, message: 'When do you open on Monday?' }));
  const durableUrl = `http://127.0.0.1:${durablePort}/durable`;
  if (WARMUP_S > 0) await load(durableUrl, {}, durableBodies, WARMUP_S);
  rows.push({ name: 'bare durable route (own process)', ...(await measured([durable.pid], () => load(durableUrl, {}, durableBodies))) });
  const durableExited = new Promise((r) => durable.once('exit', r));
  durable.kill('SIGTERM');
  await durableExited;

  const timings = process.env.BENCH_TIMINGS === '1';
  const embedded = await startPlatform({ env: { LOG_LEVEL: 'error', ...UNLIMITED, ...(timings ? { SB_TIMINGS: '1' } : {}) } });
  rows.push(await chatRow('chat respond, embedded (one process)', embedded, [embedded.child.pid]));
  await embedded.stop();
  removeDir(embedded.dataDir);
  const steps = timings ? /timings \(ms[\s\S]*/.exec(embedded.stdout())?.[0] : undefined;

  const cluster = await startCluster({ workers: 2, leaseTtlMs: 3000, passivateAfterMs: 600_000, env: UNLIMITED });
  rows.push(await chatRow('chat respond over NATS (edge + two workers)', cluster.edge, [cluster.edge.child.pid, ...cluster.workers.map((w) => w.child.pid)]));
  await cluster.stop();

  const base = rows[0].rps;
  const durableRow = rows[1];
  console.log(`\nchat benchmark — ${new Date().toISOString().slice(0, 10)}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${CONVERSATIONS} concurrent conversations of ${TURNS} turns, ${DURATION_S} s per run after ${WARMUP_S} s of warm-up`);
  const width = Math.max(...rows.map((r) => r.name.length));
  const baseCpu = rows[0].cpuUs ?? Number.NaN;
  for (const r of rows) {
    const cpu = r.cpuUs === undefined || Number.isNaN(r.cpuUs) ? '' : `  CPU ${fmt(r.cpuUs)} µs/request (${fmt(r.cpuUs / baseCpu, 1)} × bare)`;
    const ofDurable = r === rows[0] || r === durableRow ? '' : ` (${fmt((r.rps / durableRow.rps) * 100, 1)} % of durable)`;
    console.log(`  ${r.name.padEnd(width)}  ${fmt(r.rps)} /s  p50 ${fmt(r.p50, 1)} ms  p99 ${fmt(r.p99, 1)} ms  ${fmt((r.rps / base) * 100, 1)} % of bare${ofDurable}${cpu}${r.errors ? `  errors ${r.errors}` : ''}`);
  }
  // Issue 12's targets, each judged on this run.
  const embeddedRow = rows[2];
  const natsRow = rows[3];
  const verdict = (met: boolean) => (met ? 'met' : 'not met');
  console.log('  targets (issue 12):');
  console.log(`    embedded ≥ a third of the bare durable route: ${fmt((embeddedRow.rps / durableRow.rps) * 100, 1)} %, ${verdict(embeddedRow.rps * 3 >= durableRow.rps)}`);
  console.log(`    ≤ 150 µs of CPU per turn: ${fmt(embeddedRow.cpuUs ?? Number.NaN)} µs (${fmt((embeddedRow.cpuUs ?? Number.NaN) / baseCpu, 1)} × the bare Fastify route's), ${verdict((embeddedRow.cpuUs ?? Infinity) <= 150)}`);
  console.log(`    p99 under 20 ms: ${fmt(embeddedRow.p99, 1)} ms, ${verdict(embeddedRow.p99 < 20)}`);
  console.log(`    over NATS at least the embedded rate: ${fmt(natsRow.rps / embeddedRow.rps, 2)} ×, ${verdict(natsRow.rps >= embeddedRow.rps)}`);
  if (steps) console.log(`\nembedded, per step (${steps.trim().split('\n').length - 1} steps):\n${steps}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
