/**
 * The LMDB environment behind the embedded store: one memory-mapped file, `${dataDir}/store.mdb`, holding
 * named sub-databases. Every process that opens the same data directory maps the same file; LMDB's
 * single-writer lock (a robust process-shared mutex) serialises their write transactions, which is what
 * makes each read-check-write done in `transactionSync` atomic across processes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { open, type Database, type Key, type RootDatabase } from 'lmdb';
import { timings } from '../../platform/timings.js';
import type { Doc } from '../types.js';
import type { StoredEntry } from './journal.js';
import type { StoredSnapshot } from './snapshots.js';

export interface Env {
  root: RootDatabase;
  /**
   * Runs `write` inside the next group commit: the writes queued in one event-loop turn share one
   * synchronous write transaction (one durable commit), each in a child transaction of its own, so a write
   * that throws (a duplicate, a failed check) rolls back alone. Resolves after the commit.
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
  /** seq -> journal entry (without its seq). */
  journal: Database<StoredEntry, number>;
  /** [entry key, version, seq] -> true, for `journal.ofActor`. */
  journalByActor: Database<true, Key>;
  /** Counters: `journal.seq` is the last journal seq assigned. */
  meta: Database<number, string>;
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
    journal: root.openDB<StoredEntry, number>({ name: 'journal' }),
    journalByActor: root.openDB<true, Key>({ name: 'journal-by-actor' }),
    meta: root.openDB<number, string>({ name: 'meta' }),
  };
}

interface Queued {
  write: () => unknown;
  resolve: (value: any) => void;
  reject: (err: unknown) => void;
}

/** The group-commit queue of an environment (see `Env.batch`). */
function groupCommit(root: RootDatabase): <T>(write: () => T) => Promise<T> {
  let queue: Queued[] = [];
  let queuedAt = 0;
  const flush = () => {
    const batch = queue;
    queue = [];
    const t0 = timings ? performance.now() : 0;
    if (timings) {
      timings.add('store.batch wait', t0 - queuedAt);
      timings.add('store.batch size (count)', batch.length);
    }
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; err: unknown }> = [];
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
      });
    } catch (err) {
      for (const q of batch) q.reject(err);
      return;
    }
    timings?.since('store.commit (sync)', t0);
    batch.forEach((q, i) => {
      const o = outcomes[i];
      if (o.ok) q.resolve(o.value);
      else q.reject(o.err);
    });
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
