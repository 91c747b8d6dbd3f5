/**
 * The snapshot writer thread (see `writer.ts`): it opens the same environment as the thread that started it
 * and commits the snapshot writes it is sent, with their journal entries, in its own group commits. What it
 * runs is the store's own `LmdbSnapshots.putMany`; only the thread differs.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { timings } from '../../platform/timings.js';
import { closeEnv, openEnv } from './env.js';
import { LmdbSnapshots } from './snapshots.js';
import type { FromWriter, ToWriter, WriterData } from './writer.js';

const { dataDir } = workerData as WriterData;
const env = openEnv(dataDir);
const snapshots = new LmdbSnapshots(env);
const port = parentPort!;

port.on('message', (m: ToWriter) => {
  if (m.type === 'close') {
    // Under SB_TIMINGS, this thread's figures (its group commits) go to the process's report.
    void closeEnv(env).finally(() => port.postMessage({ type: 'closed', ...(timings ? { timings: timings.report() } : {}) } satisfies FromWriter));
    return;
  }
  // Each call is judged on its own, as `putMany` would be in the sending thread. The calls of one message
  // (and of every message handled in this turn) share one group commit.
  for (const call of m.calls) {
    snapshots.putLocal(call.writes).then(
      (results) => port.postMessage({ type: 'done', id: call.id, results } satisfies FromWriter),
      (err: unknown) => port.postMessage({ type: 'failed', id: call.id, err } satisfies FromWriter),
    );
  }
});
port.postMessage({ type: 'started' } satisfies FromWriter);
