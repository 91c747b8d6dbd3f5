/**
 * The LMDB environment behind the embedded store: one memory-mapped file, `${dataDir}/store.mdb`, holding
 * named sub-databases. Every process that opens the same data directory maps the same file; LMDB's
 * single-writer lock (a robust process-shared mutex) serialises their write transactions, which is what
 * makes each read-check-write done in `transactionSync` atomic across processes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { open, type Database, type Key, type RootDatabase, type TransactionFlags } from 'lmdb';
import { timings } from '../../platform/timings.js';
import type { Doc } from '../types.js';
import type { StoredSnapshot } from './snapshots.js';

export interface Env {
  root: RootDatabase;
  /**
   * Runs `write` inside the next group commit: the writes queued in one event-loop turn share one
   * synchronous write transaction (one commit), each in a child transaction of its own, so a write that
   * throws (a duplicate, a failed check) rolls back alone. Resolves once the commit is flushed to disk.
   */
  batch<T>(write: () => T): Promise<T>;
  /** [collection, id] -> record. */
  records: Database<Doc, Key>;
  /** [collection, indexName, ...values, id] -> true. */
  indexes: Database<true, Key>;
  /** collection -> names of the indexes built for it, so that a newly declared index gets back-filled. */
  catalog: Database<string[], string>;
  /** snapshot key -> snapshot. */
  snapshots: Database<StoredSnapshot, string>;
  /** [shard, deadline, snapshot key] -> true, for `due`. */
  deadlines: Database<true, Key>;
}

/** Opens (creating when missing) the environment in `dataDir`. */
export function openEnv(dataDir: string): Env {
  fs.mkdirSync(dataDir, { recursive: true });
  const root = open({ path: path.join(dataDir, 'store.mdb') });
  return {
    root,
    batch: groupCommit(root),
    records: root.openDB<Doc, Key>({ name: 'records' }),
    indexes: root.openDB<true, Key>({ name: 'indexes' }),
    catalog: root.openDB<string[], string>({ name: 'catalog' }),
    snapshots: root.openDB<StoredSnapshot, string>({ name: 'snapshots' }),
    deadlines: root.openDB<true, Key>({ name: 'deadlines' }),
  };
}

interface Queued {
  write: () => unknown;
  resolve: (value: any) => void;
  reject: (err: unknown) => void;
}

/**
 * `transactionSync` flags (lmdb-js `TransactionFlags`, a type-only enum): ABORTABLE | SYNCHRONOUS_COMMIT
 * (the default, 3) | NO_SYNC_FLUSH: committed before returning, not flushed. The flush follows on a libuv
 * thread (`sync`).
 */
const COMMIT_WITHOUT_FLUSH = (1 | 2 | 0x10000) as TransactionFlags;

/** lmdb-js's flush of everything committed so far, on a libuv thread (not in its typings). */
type Flushable = { sync(callback: (error?: unknown) => void): void };

/**
 * The group-commit queue of an environment (see `Env.batch`). The read-check-writes run and commit
 * synchronously, under LMDB's writer lock, so they are atomic across processes; the flush to disk (an fsync,
 * milliseconds on a busy disk) then runs off the event loop, and the batch's writes resolve only after it:
 * durable before anyone is told. Meanwhile the event loop serves the next requests and their batch, which
 * is what the synchronous flush prevented. Later commits never become durable before earlier ones (a flush
 * covers every commit before it), and the environment's overlapping sync keeps the file consistent if the
 * machine stops between a commit and its flush.
 */
function groupCommit(root: RootDatabase): <T>(write: () => T) => Promise<T> {
  let queue: Queued[] = [];
  let queuedAt = 0;
  // One flush in flight at a time: commits made meanwhile wait for the next one, which covers them all
  // (a flush that began before a commit may not cover it). Keeps fsyncs and busy libuv threads to one.
  let flushing = false;
  let waiting: Array<(error?: unknown) => void> = [];
  const flushToDisk = () => {
    flushing = true;
    const covered = waiting;
    waiting = [];
    const finished = (error?: unknown) => {
      flushing = false;
      for (const done of covered) done(error);
      if (waiting.length > 0) flushToDisk();
    };
    try {
      (root as unknown as Flushable).sync((error) => finished(error ?? undefined));
    } catch (error) {
      // A closed environment throws at once: the writes are not known to be durable.
      finished(error);
    }
  };
  const durable = (done: (error?: unknown) => void) => {
    waiting.push(done);
    if (!flushing) flushToDisk();
  };
  const flush = () => {
    const batch = queue;
    queue = [];
    const t0 = timings ? performance.now() : 0;
    if (timings) {
      timings.add('store.batch wait', t0 - queuedAt);
      timings.add('store.batch size (count)', batch.length);
    }
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; err: unknown }> = [];
    const settle = (err?: unknown) => {
      if (timings) timings.since('store.commit to durable', t0);
      batch.forEach((q, i) => {
        const o = outcomes[i];
        if (err) q.reject(err);
        else if (o.ok) q.resolve(o.value);
        else q.reject(o.err);
      });
    };
    try {
      root.transactionSync(() => {
        for (const q of batch) {
          try {
            // Nested in a write transaction, lmdb-js runs this as a child transaction: a throw aborts it alone.
            outcomes.push({ ok: true, value: root.transactionSync(q.write) });
          } catch (err) {
            outcomes.push({ ok: false, err });
          }
        }
      }, COMMIT_WITHOUT_FLUSH);
      timings?.since('store.commit (sync, no flush)', t0);
      durable(settle);
    } catch (err) {
      for (const q of batch) q.reject(err);
    }
  };
  return <T>(write: () => T) =>
    new Promise<T>((resolve, reject) => {
      if (queue.length === 0) {
        setImmediate(flush);
        if (timings) queuedAt = performance.now();
      }
      queue.push({ write, resolve, reject });
    });
}
