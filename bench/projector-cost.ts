/**
 * What each projector costs per journal entry, measured where nothing else competes for the cores: the
 * embedded platform is driven with the Chat API load of `chat.ts` (64 conversations of 20 turns) for a while,
 * stopped, and its journal replayed into its own store by this process, projector by projector, in batches the
 * size a projection runner's cycle reads under that load, with the runner's partitioning (`Partitioning`).
 * Each projector's replay starts from its `reset` (as `switchboard rebuild` does) and is timed in CPU (user +
 * system, every thread of this process: LMDB's writer thread included), three rounds, the median printed. The
 * baseline, replayed the same way in the same run: the stand-in read model of `bench/projector.ts` (one
 * versioned record per conversation per batch), the least a read model of the conversations costs.
 *
 * Throughput benchmarks cannot tell a projector's cost on these machines: the projection thread runs on the
 * core the load client and the platform's other threads share, and the runs swing more than the difference.
 * Run: `npm run build && node dist/bench/projector-cost.js` (`BENCH_S`: seconds of load, `BENCH_BATCH`:
 * entries per cycle).
 */
import { cpus } from 'node:os';
import { partitionOf, projectors, type Partitioning, type Projector } from '../actors/mod.js';
import { openStore, type JournalEntry } from '../store/mod.js';
import { chatProject } from '../test/helpers/chat.js';
import { removeDir, startPlatform } from '../test/helpers/platform.js';
import { chatLoad } from './chat-load.js';
import { benchProjector } from './projector.js';
import { fmt } from './stats.js';

const DURATION_S = Number(process.env.BENCH_S ?? 15);
/** About what a runner's cycle reads at the Chat benchmark's rate (a cycle every `PROJECTION_INTERVAL_MS`). */
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
/** The platform's default (`PROJECTION_PARTITIONS`). */
const PARTITIONS = 16;
const ROUNDS = 3;
const CONVERSATIONS = 64;
const TURNS = 20;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const p = await startPlatform({ env: { LOG_LEVEL: 'error', CHAT_RATE_PER_KEY: '1000000', CHAT_RATE_PER_PROJECT: '1000000' } });
  const c = await chatProject(p, { name: 'projector cost' });
  const load = await chatLoad(p.edge, c, { connections: CONVERSATIONS, turns: TURNS, duration: DURATION_S });
  await p.stop();

  const store = await openStore({ dataDir: p.dataDir });
  const journal: JournalEntry[] = [];
  for (let after = 0; ; ) {
    const read = await store.journal.read(after, 5000);
    if (read.length === 0) break;
    journal.push(...read);
    after = read[read.length - 1].seq;
  }
  const partitions: Partitioning = { count: PARTITIONS, of: (e) => partitionOf(e, PARTITIONS) };
  const replay = async (projector: Projector): Promise<number> => {
    await projector.reset(store);
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < journal.length; i += BATCH) {
      const mine = journal.slice(i, i + BATCH).filter((e) => !projector.kinds || projector.kinds.includes(e.kind));
      if (mine.length) await projector.apply(mine, store, partitions);
    }
    const cpu = process.cpuUsage(cpu0);
    return (cpu.user + cpu.system) / journal.length;
  };
  const candidates = [...projectors(), benchProjector];
  const costs = new Map<string, number[]>(candidates.map((x) => [x.name, []]));
  for (let round = 0; round < ROUNDS; round++) for (const x of candidates) costs.get(x.name)!.push(await replay(x));
  await store.close();
  removeDir(p.dataDir);

  const baseline = median(costs.get(benchProjector.name)!);
  const kinds = new Map<string, number>();
  for (const e of journal) kinds.set(e.kind, (kinds.get(e.kind) ?? 0) + 1);
  console.log(
    `\nprojector cost — ${new Date().toISOString()}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}; ` +
      `the journal of ${DURATION_S} s of chat load (${fmt(load.requests.average)} turns/s): ${fmt(journal.length)} entries (${[...kinds].map(([k, n]) => `${k} ${fmt(n)}`).join(', ')}), ` +
      `replayed in batches of ${BATCH} over ${PARTITIONS} partitions, median of ${ROUNDS} rounds (CPU µs per journal entry, all threads)`,
  );
  let total = 0;
  for (const x of candidates) {
    if (x === benchProjector) continue;
    const cost = median(costs.get(x.name)!);
    total += cost;
    console.log(`  ${x.name.padEnd(26)} ${fmt(cost, 1).padStart(7)} µs   ${fmt(cost / baseline, 2)} × the stand-in`);
  }
  console.log(`  ${'all of them'.padEnd(26)} ${fmt(total, 1).padStart(7)} µs   ${fmt(total / baseline, 2)} × the stand-in`);
  console.log(`  ${'the stand-in (baseline)'.padEnd(26)} ${fmt(baseline, 1).padStart(7)} µs`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
