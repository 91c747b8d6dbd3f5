import { Worker } from 'node:worker_threads';
import type { FromThread, ThreadData, ToThread } from './worker.js';

/** What the thread runs with (`ThreadData` without the wake-up signal, which the handle makes), and where its logs go. */
export interface ThreadOptions extends Omit<ThreadData, 'signal'> {
  log?: (msg: string, extra?: object) => void;
  /** Where the runner's errors go (an entry set aside); `log` when absent. */
  error?: (msg: string, extra?: object) => void;
}

/**
 * The thread's young generation, in MiB, for a process started without `--max-semi-space-size`: projectors
 * allocate per entry, and a young generation this size lets those objects die young instead of being promoted
 * and collected again. With the flag (`npm start`, the Procfile) V8 sizes every isolate's young generation by
 * it, this thread's included, and this limit has no effect (bench/README.md, forty-first session).
 */
const YOUNG_GENERATION_MB = 96;

/**
 * The main thread's handle on the projection thread (`worker.ts`). A thread that dies is started again
 * after a second (it resumes from its checkpoints).
 */
export class ProjectionThread {
  private worker: Worker | null = null;
  private readonly signal = new Int32Array(new SharedArrayBuffer(4));
  private owned: number[];
  private stopping = false;
  private restartTimer: NodeJS.Timeout | null = null;

  constructor(private readonly o: ThreadOptions) {
    this.owned = o.owned;
  }

  /** Starts the thread; resolves once it runs. */
  start(): Promise<void> {
    const data: ThreadData = { signal: this.signal.buffer as SharedArrayBuffer, ...this.o, owned: this.owned };
    delete (data as Partial<ThreadOptions>).log;
    delete (data as Partial<ThreadOptions>).error;
    const worker = new Worker(new URL('./worker.js', import.meta.url), { workerData: data, name: 'projections', resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } });
    this.worker = worker;
    return new Promise((resolve) => {
      worker.on('message', (m: FromThread) => {
        if (m.type === 'started') resolve();
        if (m.type === 'log') (m.level === 'error' ? this.o.error ?? this.o.log : this.o.log)?.(m.msg, m.extra);
      });
      worker.on('error', (err) => this.o.log?.('projection thread failed', { err: String(err.stack ?? err) }));
      worker.on('exit', (code) => {
        if (this.worker === worker) this.worker = null;
        resolve();
        if (this.stopping) return;
        this.o.log?.('projection thread exited; starting it again', { code });
        this.restartTimer = setTimeout(() => void this.start(), 1000);
      });
    });
  }

  /** A commit happened: wake the runner (a shared-memory counter and a notify; no message). */
  wake(): void {
    Atomics.add(this.signal, 0, 1);
    Atomics.notify(this.signal, 0);
  }

  /** The partitions this process owns now. */
  setOwned(partitions: number[]): void {
    if (partitions.join() === this.owned.join()) return;
    this.owned = partitions;
    this.worker?.postMessage({ type: 'owned', partitions } satisfies ToThread);
    this.wake();
  }

  /** Lets the runner finish its cycle, closes its store handle and ends the thread. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    const worker = this.worker;
    if (!worker) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => void worker.terminate().then(() => resolve()), 10_000);
      worker.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      worker.on('message', (m: FromThread) => {
        if (m.type === 'stopped') void worker.terminate();
      });
      worker.postMessage({ type: 'stop' } satisfies ToThread);
      this.wake();
    });
  }
}
