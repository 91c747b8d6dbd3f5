/**
 * Projection lag at full chat load (issue 12): the embedded platform (`npm start`: the projection runner in a
 * worker thread on the second core) driven with the Chat API load of `chat.ts` (64 conversations of 20 turns),
 * with its own projectors (the lag of `conversations`, the records, documents, search postings and slots, is
 * sampled), then again with a stand-in projector (`bench/projector.ts`) added. Every 250 ms the bench
 * reads `GET /admin/v1/runtime/projections`: the runner's commit-to-applied lag over its latest 2,048 entries
 * (p50, p99) and how far its checkpoint is behind the journal's head; the second row's rate and CPU show what
 * one more projector costs. Run: `npm run build && node dist/bench/projection-lag.js`.
 */
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { chatProject } from '../test/helpers/chat.js';
import { http } from '../test/helpers/http.js';
import { removeDir, startPlatform, type Platform } from '../test/helpers/platform.js';
import { chatLoad } from './chat-load.js';
import { cpuSeconds } from './proc.js';
import { fmt } from './stats.js';
import { WARMUP_S } from './warmup.js';

const DURATION_S = Number(process.env.BENCH_S ?? 10);
const CONVERSATIONS = 64;
const TURNS = 20;

const cpuMs = (pid: number | undefined): number => cpuSeconds(pid) * 1000;

const percentile = (sorted: number[], q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] : Number.NaN);

/** `watch`: the projection whose lag is sampled (by name, as `GET /admin/v1/runtime/projections` lists it). */
async function run(name: string, p: Platform, watch: string) {
  const c = await chatProject(p, { name });
  if (WARMUP_S > 0) await chatLoad(p.edge, c, { connections: CONVERSATIONS, turns: TURNS, duration: WARMUP_S });
  const admin = (q = '') => http(p.edge, 'GET', `/admin/v1/runtime/projections${q}`, { headers: { authorization: `Bearer ${p.operatorToken}` } });
  const windows: Array<{ p50: number; p99: number; behind: number }> = [];
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      await new Promise((r) => setTimeout(r, 250));
      const s = (await admin()).body.projections?.find((x: { name: string }) => x.name === watch);
      if (s?.lag) windows.push({ p50: s.lag.p50, p99: s.lag.p99, behind: s.behind });
    }
  })();
  const cpu0 = cpuMs(p.child.pid);
  const result = await chatLoad(p.edge, c, { connections: CONVERSATIONS, turns: TURNS, duration: DURATION_S });
  const cpuUs = ((cpuMs(p.child.pid) - cpu0) * 1000) / Math.max(1, result.requests.total);
  watching = false;
  await watcher;
  const t0 = Date.now();
  const drained = (await admin('?wait=1&timeout_ms=60000')).body.caughtUp;
  return { name, watch, rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, cpuUs, errors: result.errors + result.non2xx, windows, drainMs: Date.now() - t0, drained };
}

async function main() {
  const projector = process.env.BENCH_PROJECTOR ?? fileURLToPath(new URL('./projector.js', import.meta.url));
  const load0 = loadavg()[0];
  const plain = await startPlatform({ env: { LOG_LEVEL: 'error', CHAT_RATE_PER_KEY: '1000000', CHAT_RATE_PER_PROJECT: '1000000' } });
  const platform = await run("the platform's projectors", plain, 'conversations');
  await plain.stop();
  removeDir(plain.dataDir);
  const projecting = await startPlatform({ env: { LOG_LEVEL: 'error', CHAT_RATE_PER_KEY: '1000000', CHAT_RATE_PER_PROJECT: '1000000', PROJECTION_MODULES: projector } });
  const withStandIn = await run('and the stand-in projector', projecting, 'bench-conversation-steps');
  await projecting.stop();
  removeDir(projecting.dataDir);

  console.log(`\nprojection lag — ${new Date().toISOString()}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}, load average ${fmt(load0, 1)} → ${fmt(loadavg()[0], 1)}, ${CONVERSATIONS} conversations of ${TURNS} turns, ${DURATION_S} s after ${WARMUP_S} s of warm-up`);
  for (const r of [platform, withStandIn]) {
    console.log(`  ${r.name.padEnd(34)} ${fmt(r.rps)} turns/s  p50 ${fmt(r.p50, 1)} ms  p99 ${fmt(r.p99, 1)} ms  CPU ${fmt(r.cpuUs)} µs/turn (all threads)${r.errors ? `  errors ${r.errors}` : ''}`);
    const w = r.windows;
    const p50s = w.map((x) => x.p50).sort((a, b) => a - b);
    const p99s = w.map((x) => x.p99).sort((a, b) => a - b);
    console.log(`    lag of \`${r.watch}\`, commit to applied, over ${w.length} windows of the latest 2,048 entries: p50 median ${fmt(percentile(p50s, 0.5), 1)} ms, p99 median ${fmt(percentile(p99s, 0.5), 1)} ms, worst window p99 ${fmt(p99s[p99s.length - 1] ?? NaN, 1)} ms; most entries behind ${Math.max(0, ...w.map((x) => x.behind))}`);
    console.log(`    after the load: caught up ${r.drained} in ${r.drainMs} ms`);
  }
  console.log('  target: p99 under 250 ms');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
