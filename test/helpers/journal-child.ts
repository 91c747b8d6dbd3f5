/**
 * A process hosting counter actors on the embedded store, for the journal's crash tests:
 * `node journal-child.js DATA_DIR commit` drives INCs on 50 counters without end (printing `committed N`),
 * `node journal-child.js DATA_DIR project BATCH` only runs the projection runner (the test projector) and prints
 * `checkpoint N` whenever the lowest of its partitions' checkpoints moves. The test reads that line instead of
 * opening the data directory itself while this process commits: with lmdb-js 3.5.6, a process opening an LMDB
 * file can roll back another process's commit made during the open (docs/storage.md).
 */
import { fileURLToPath } from 'node:url';
import { join, dirname } from 'node:path';
import { startRuntime } from '../../actors/mod.js';
import { openStore } from '../../store/mod.js';

const COUNTERS = 50;

const [dataDir, mode, batch] = process.argv.slice(2);
const store = await openStore({ dataDir });
const projections = mode === 'project'
  ? { store: { dataDir }, modules: [join(dirname(fileURLToPath(import.meta.url)), 'projector.js')], partitions: 4, batch: Number(batch ?? 100), pollMs: 50, intervalMs: 0, nice: 0, yieldBelowMs: 100 }
  : undefined;
const runtime = await startRuntime({ store, worker: true, shardCount: 16, leaseTtlMs: 3000, passivateAfterMs: 60_000, askTimeoutMs: 10_000, projections });
process.stdout.write('ready\n');
if (mode === 'project') {
  const checkpoints = store.collection<{ id: string; partitions: Record<string, number> }>({ name: 'projection_checkpoints', readModel: true });
  let reported = -1;
  setInterval(() => {
    store.refresh();
    void checkpoints.get('test-counts').then((doc) => {
      const lowest = Math.min(...[0, 1, 2, 3].map((p) => doc?.partitions[p] ?? 0));
      if (lowest !== reported) process.stdout.write(`checkpoint ${(reported = lowest)}\n`);
    });
  }, 5);
}
if (mode === 'commit') {
  let committed = 0;
  await Promise.all(
    Array.from({ length: COUNTERS }, async (_, i) => {
      for (;;) {
        await runtime.client.ask('counter', `c-${i}`, { type: 'INC' });
        if (++committed % 100 === 0) process.stdout.write(`committed ${committed}\n`);
      }
    }),
  );
}
