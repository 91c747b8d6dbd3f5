/**
 * The journal append's own cost (issue 12): group-committed snapshot writes on the embedded store with and
 * without their step's journal entry, in one process, alternating the two modes. Each round writes 64 actors'
 * 3 KB snapshots in one `putMany` (as 64 concurrent chat turns do); with the entry, each also carries a
 * 400-byte `conversation.turn`-like event. Prints CPU per write (process.cpuUsage, both modes in the same run)
 * and writes per second. Run: `npm run build && node dist/bench/journal-append.js`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir, loadavg } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../store/mod.js';
import { removeDir } from '../test/helpers/platform.js';
import { fmt } from './stats.js';

const ACTORS = 64;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 400);

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'sb-journal-bench-'));
  const store = await openStore({ dataDir: dir });
  const data = new Uint8Array(3000).fill(7);
  const event = { type: 'conversation.turn', data: { account_id: 'acc_1', project_id: 'prj_1', channel: 'chat', turn: { role: 'user', text: 'x'.repeat(300), at: '2026-11-23T21:00:00.000Z' }, latency_ms: 12, function_errors: [] } };
  const versions = new Map<string, number>();
  const round = async (withStep: boolean) => {
    const writes = Array.from({ length: ACTORS }, (_, i) => {
      const key = `conversation/bench-${i}`;
      const v = versions.get(key) ?? 0;
      return { key, data, expectedVersion: v, fence: 1, shard: i % 64, deadline: null, ...(withStep ? { step: { value: { active: 'listening' }, events: [event] } } : {}) };
    });
    const results = await store.snapshots.putMany(writes);
    results.forEach((r, i) => r.ok && versions.set(writes[i].key, r.version));
  };
  const totals = { with: { cpu: 0, ms: 0, n: 0 }, without: { cpu: 0, ms: 0, n: 0 } };
  for (let i = 0; i < 20; i++) await round(i % 2 === 0);
  for (let block = 0; block < 10; block++) {
    for (const mode of ['without', 'with'] as const) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      for (let r = 0; r < ROUNDS / 10; r++) await round(mode === 'with');
      const c = process.cpuUsage(c0);
      totals[mode].cpu += c.user + c.system;
      totals[mode].ms += performance.now() - t0;
      totals[mode].n += (ROUNDS / 10) * ACTORS;
    }
  }
  await store.close();
  removeDir(dir);
  console.log(`\njournal append — ${new Date().toISOString()}, load average ${fmt(loadavg()[0], 1)}, ${ACTORS} writes of 3 KB per group commit, ${ROUNDS} commits per mode, modes alternated`);
  for (const mode of ['without', 'with'] as const) {
    const t = totals[mode];
    console.log(`  ${mode === 'with' ? 'snapshot + journal entry' : 'snapshot only           '}  CPU ${fmt(t.cpu / t.n, 1)} µs/write  ${fmt((t.n / t.ms) * 1000)} writes/s`);
  }
  console.log(`  the entry's own CPU: ${fmt((totals.with.cpu / totals.with.n) - (totals.without.cpu / totals.without.n), 1)} µs per step`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
