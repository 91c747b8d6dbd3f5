/**
 * Alert rule evaluation cost: 10 rules × 1,000 projects (10,000 evaluations) over per-minute metric buckets,
 * each rule reading its window (5, 10 or 60 minutes) and computing its metric (a count or a latency
 * percentile from the merged histograms), exactly as the `evaluate` effect does. Baseline in the same run:
 * reading the same buckets bare (the same queries, no summing or percentile). Prints wall and CPU time per
 * evaluation. Seeds the buckets through the metrics projector on a fresh LMDB store.
 *
 * Run: `npm run build && node dist/bench/alerts.js [projects=1000] [minutes=10] [lanes=1]`
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type JournalEntry } from '../store/mod.js';
import { metricBuckets, metricsProjector, metricValue, projectScope, readWindow, minuteOf, type MetricName } from '../actors/metrics/mod.js';
import { removeDir } from '../test/helpers/platform.js';

const projects = Number(process.argv[2] ?? 1000);
const minutes = Number(process.argv[3] ?? 10);
const LANES = Number(process.argv[4] ?? 1);
const dir = mkdtempSync(join(tmpdir(), 'sb-bench-alerts-'));
const store = await openStore({ dataDir: dir });
const now = Date.now();
const projector = metricsProjector();

// One entry per (project, minute, lane): a conversation started, two turns, one with a function error.
let seq = 0;
const t0 = performance.now();
for (let m = 0; m < minutes; m++) {
  const at = now - m * 60_000;
  const batch: JournalEntry[] = [];
  for (let p = 0; p < projects; p++) {
    for (let l = 0; l < LANES; l++) {
      const owner = { account_id: `acc${p % 100}`, project_id: `proj${p}` };
      batch.push({
        seq: ++seq, key: `conversation/c${p}-${l}`, kind: 'conversation', id: `c${p}-${l}`, shard: (p * LANES + l) % 64, version: 1, at, value: null,
        events: [
          { type: 'conversation.started', data: owner },
          { type: 'conversation.turn', data: { ...owner, latency_ms: 100 + ((p + m + l) % 900), function_errors: 1 } },
          { type: 'conversation.turn', data: { ...owner, latency_ms: 200 + ((p * 7 + m) % 1500), function_errors: 0 } },
        ],
      });
    }
  }
  await projector.apply(batch, store);
}
const seeded = await metricBuckets(store).count({});
process.stdout.write(`seeded ${seeded} buckets (${projects} projects × ${minutes} min, ${LANES} lanes, plus account scopes) in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);

const RULES: Array<{ metric: MetricName; minutes: number }> = [
  { metric: 'function_errors', minutes: 5 }, { metric: 'call_volume', minutes: 5 }, { metric: 'api_errors', minutes: 5 }, { metric: 'call_crashes', minutes: 10 },
  { metric: 'turn_latency_p50', minutes: 5 }, { metric: 'turn_latency_p95', minutes: 5 }, { metric: 'turn_latency_p95', minutes: 10 },
  { metric: 'function_errors', minutes: 60 }, { metric: 'turn_latency_p50', minutes: 60 }, { metric: 'call_volume', minutes: 10 },
];
const at = now;

async function measure(name: string, one: (scope: string, rule: (typeof RULES)[number]) => Promise<unknown>): Promise<{ wallUs: number; cpuUs: number }> {
  const cpu0 = process.cpuUsage();
  const w0 = performance.now();
  for (let p = 0; p < projects; p++) for (const rule of RULES) await one(projectScope(`proj${p}`), rule);
  const wall = performance.now() - w0;
  const cpu = process.cpuUsage(cpu0);
  const n = projects * RULES.length;
  const r = { wallUs: (wall * 1000) / n, cpuUs: (cpu.user + cpu.system) / n };
  process.stdout.write(`${name}: ${n} evaluations in ${(wall / 1000).toFixed(2)} s; ${r.wallUs.toFixed(0)} µs wall, ${r.cpuUs.toFixed(0)} µs CPU per evaluation\n`);
  return r;
}

const buckets = metricBuckets(store);
const last = minuteOf(at);
for (let round = 0; round < 2; round++) {
  const bare = await measure(`baseline (bare bucket reads), round ${round + 1}`, (scope, rule) => buckets.find({ scope, minute: { $gt: last - rule.minutes, $lte: last } }));
  const evalr = await measure(`rule evaluation, round ${round + 1}`, async (scope, rule) => metricValue(await readWindow(store, scope, at, rule.minutes), rule.metric));
  process.stdout.write(`  evaluation / bare read: ${(evalr.cpuUs / bare.cpuUs).toFixed(2)} × CPU; at the default 60 s interval 10,000 rules take ${((evalr.cpuUs * projects * RULES.length) / 60e6 * 100).toFixed(2)} % of a core\n`);
}
await store.close();
removeDir(dir);
