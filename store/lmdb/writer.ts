/**
 * The snapshot writer thread's handle. Every actor step ends in a snapshot write with its journal entry; the
 * compare-and-set, the puts and the entry's encoding run under LMDB's writer lock, and on the actors' event
 * loop they take time every step needs. The embedded store hands them to a thread of its own instead
 * (`writer-thread.ts`), started on the first write: the actors' thread sends the encoded snapshot and the
 * step, and hears the result once the commit is durable, exactly as from its own group commit. LMDB's one
 * writer lock orders this thread's commits with every other writer's, so journal seqs still follow commit
 * order across threads and processes.
 */
import { Worker } from 'node:worker_threads';
import type { SnapshotPutResult, SnapshotWrite } from '../types.js';

/** The thread's `workerData`. */
export interface WriterData {
  dataDir: string;
}

/** One `putMany` call, sent to the thread. */
interface Call {
  id: number;
  writes: SnapshotWrite[];
}

export type ToWriter = { type: 'put'; calls: Call[] } | { type: 'close' };
export type FromWriter =
  | { type: 'started' }
  | { type: 'done'; id: number; results: SnapshotPutResult[] }
  | { type: 'failed'; id: number; err: unknown }
  | { type: 'closed'; timings?: string };

interface Waiting {
  resolve: (results: SnapshotPutResult[]) => void;
  reject: (err: unknown) => void;
}

export class SnapshotWriter {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  /** Calls made in this event-loop turn: sent together, in one message, at its end. */
  private outgoing: Call[] = [];
  /** Told once nothing is waiting (`close`). */
  private drained: (() => void) | null = null;

  /**
   * `committed` runs in this thread before the callers of a commit hear of it: lmdb-js reuses a read
   * transaction until a timer ends it, and learns of its own thread's commits only, so without it a read made
   * right after a write here could miss the write.
   */
  constructor(
    private readonly dataDir: string,
    private readonly committed: () => void,
  ) {}

  /** Commits `writes` in the writer thread (see `SnapshotStore.putMany`); resolves once durable. */
  putMany(writes: SnapshotWrite[]): Promise<SnapshotPutResult[]> {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.waiting.set(id, { resolve, reject });
      // A typed array is cloned with its whole buffer, and an encoder's output is often a view of a larger
      // one it keeps filling: send each snapshot's own bytes only.
      this.outgoing.push({ id, writes: writes.map((w) => (w.data.byteLength === w.data.buffer.byteLength ? w : { ...w, data: w.data.slice() })) });
      if (this.outgoing.length === 1) setImmediate(() => this.send());
    });
  }

  /** Waits for the writes sent, then ends the thread. */
  async close(): Promise<void> {
    if (this.waiting.size > 0) await new Promise<void>((done) => (this.drained = done));
    const worker = this.worker;
    if (!worker) return;
    this.worker = null;
    await new Promise<void>((done) => {
      worker.once('exit', () => done());
      worker.on('message', (m: FromWriter) => {
        if (m.type !== 'closed') return;
        if (m.timings) process.stdout.write(`snapshot writer thread ${m.timings}`);
        void worker.terminate();
      });
      worker.ref();
      worker.postMessage({ type: 'close' } satisfies ToWriter);
    });
  }

  private send(): void {
    const calls = this.outgoing;
    this.outgoing = [];
    const worker = this.worker ?? this.start();
    // Held open while writes are in flight (a process waiting on one must not exit), not while idle.
    worker.ref();
    try {
      worker.postMessage({ type: 'put', calls } satisfies ToWriter);
    } catch {
      // Something in a write cannot be cloned (a function among a step's events): send the calls one by one,
      // so that only the call holding it fails, as a bad write would.
      for (const call of calls) {
        try {
          worker.postMessage({ type: 'put', calls: [call] } satisfies ToWriter);
        } catch (err) {
          this.waiting.get(call.id)?.reject(err);
          this.waiting.delete(call.id);
        }
      }
      if (this.waiting.size === 0) this.idle(worker);
    }
  }

  private start(): Worker {
    const worker = new Worker(new URL('./writer-thread.js', import.meta.url), { workerData: { dataDir: this.dataDir } satisfies WriterData, name: 'snapshot-writer' });
    this.worker = worker;
    worker.on('message', (m: FromWriter) => {
      if (m.type !== 'done' && m.type !== 'failed') return;
      const w = this.waiting.get(m.id);
      if (!w) return;
      this.waiting.delete(m.id);
      this.committed();
      if (m.type === 'done') w.resolve(m.results);
      else w.reject(m.err);
      if (this.waiting.size === 0) this.idle(worker);
    });
    let failure: unknown = null;
    worker.on('error', (err) => (failure = err));
    worker.on('exit', (code) => {
      if (this.worker === worker) this.worker = null;
      // Whatever it had not answered may or may not be committed: the callers' compare-and-sets tell them
      // which on their next write, as after any failed commit. The next write starts a new thread.
      const err = failure ?? new Error(`the snapshot writer thread exited (code ${code})`);
      for (const w of this.waiting.values()) w.reject(err);
      this.waiting.clear();
      this.idle(worker);
    });
    return worker;
  }

  private idle(worker: Worker): void {
    worker.unref();
    this.drained?.();
    this.drained = null;
  }
}
