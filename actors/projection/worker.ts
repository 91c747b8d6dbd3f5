/**
 * The projection runner's thread (`worker_threads`): opens its own handle on the store (LMDB allows several
 * threads and processes on one environment), loads the projectors and runs the runner on this thread's
 * core, off the actors' event loop. The main thread wakes it after each commit through a shared counter
 * (`Atomics`), and tells it which partitions it owns.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openStore, type StoreOptions } from '../../store/mod.js';
import { loadProjectors } from './loading.js';
import { ThreadPriority } from './priority.js';
import { ProjectionRunner } from './runner.js';

/** What the main thread passes (`thread.ts`). */
export interface ThreadData {
  store: StoreOptions;
  modules: string[];
  partitions: number;
  owned: number[];
  batch: number;
  pollMs: number;
  intervalMs: number;
  runnerId: string;
  /** How much lower the thread's priority is while it keeps up (`nice` steps; 0: never lower). */
  nice: number;
  /** The lag (ms) at which it takes its normal priority back. */
  yieldBelowMs: number;
  /** An Int32Array's buffer: [0] counts wake-ups. */
  signal: SharedArrayBuffer;
}

/** Messages to the thread. */
export type ToThread = { type: 'owned'; partitions: number[] } | { type: 'stop' };
/** Messages from the thread. */
export type FromThread = { type: 'started' } | { type: 'stopped' } | { type: 'log'; msg: string; extra?: object; level?: 'error' };

async function main(): Promise<void> {
  const data = workerData as ThreadData;
  const port = parentPort!;
  const post = (m: FromThread) => port.postMessage(m);
  const signal = new Int32Array(data.signal);
  let seen = Atomics.load(signal, 0);
  let owned = data.owned;
  const store = await openStore(data.store);
  const { priority, ...yielding } = ThreadPriority.ofThisThread(data.nice, data.yieldBelowMs);
  if ('unable' in yielding && yielding.unable) post({ type: 'log', msg: yielding.unable });
  const runner = new ProjectionRunner({
    store,
    projectors: await loadProjectors(data.modules),
    partitions: data.partitions,
    owned: () => owned,
    batch: data.batch,
    pollMs: data.pollMs,
    intervalMs: data.intervalMs,
    runnerId: data.runnerId,
    log: (msg, extra) => post({ type: 'log', msg, extra }),
    error: (msg, extra) => post({ type: 'log', msg, extra, level: 'error' }),
    behind: priority ? (ms) => priority.observe(ms) : undefined,
    waitForWork: async (ms) => {
      const now = Atomics.load(signal, 0);
      if (now === seen) {
        const waited = (Atomics as unknown as { waitAsync: (a: Int32Array, i: number, v: number, ms: number) => { async: boolean; value: Promise<string> | string } }).waitAsync(signal, 0, now, ms);
        if (waited.async) await waited.value;
      }
      seen = Atomics.load(signal, 0);
    },
  });
  port.on('message', (m: ToThread) => {
    if (m.type === 'owned') owned = m.partitions;
    if (m.type === 'stop') {
      void runner
        .stop()
        .then(() => store.close())
        .finally(() => {
          post({ type: 'stopped' });
          port.close();
        });
    }
  });
  runner.start();
  post({ type: 'started' });
}

main().catch((err) => {
  parentPort?.postMessage({ type: 'log', msg: 'projection thread failed to start', extra: { err: String(err instanceof Error ? err.stack ?? err : err) } } satisfies FromThread);
  process.exitCode = 1;
  parentPort?.close();
});
