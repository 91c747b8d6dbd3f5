/**
 * A process hosting counter actors on the embedded store, for the journal's crash tests:
 * `node journal-child.js DATA_DIR commit` drives INCs on 50 counters without end (printing `committed N`),
 * `node journal-child.js DATA_DIR project BATCH` only runs the projection runner (the test projector).
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
