/**
 * The LMDB environments behind the embedded store: two memory-mapped files in the data directory, each
 * holding named sub-databases. `store.mdb` holds the snapshots, the journal and every record that is not a
 * read model; `read-models.mdb` holds the read models and the projection checkpoints, so that the projection
 * runner's write transactions and flushes never hold up an actor's commit (each file has its own writer lock
 * and its own commits). Every process that opens the same data directory maps the same files; LMDB's
 * single-writer lock (a robust process-shared mutex) serialises their write transactions on a file, which is
 * what makes each read-check-write done in `transactionSync` atomic across processes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { open, type Database, type Key, type RootDatabase } from 'lmdb';
import { timings } from '../../platform/timings.js';
import type { Doc } from '../types.js';
import type { JournalEnds, StoredEntry } from './journal.js';
import type { StoredSnapshot } from './snapshots.js';
import { SHARED_SHAPES } from './shapes.js';

/** One file's records: what a collection needs. */
export interface RecordsEnv {
  root: RootDatabase;
  /**
   * Runs `write` inside the next group commit: the writes queued in one event-loop turn share one write
   * transaction, and a write that throws (a duplicate, a failed check) fails alone: the others still commit
   * (see `groupCommit`: `write` may run twice, so it must read what it checks inside the transaction and
   * have no effect outside it). `write` runs synchronously under the writer lock; the commit is made by
   * lmdb-js's writer thread, which flushes it to disk before it writes the meta page that makes it visible
   * (`SYNCED`). Resolves once the commit is durable. Batches of one process become durable in the order they
   * were queued, a batch that runs again included (see `groupCommit`).
   */
  batch<T>(write: () => T): Promise<T>;
  /**
   * Inside a `batch` write only: puts `value` under `key` in `db` once the batch's writes have run, unless a later
   * `putLast` of the same key in the same batch replaces it, so a value rewritten within one commit (an actor's
   * snapshot data, stepped several times in one turn of the event loop) is encoded and written once. Nothing
   * in the batch may read the key back in between. When a batch runs again, each write in its own child
   * transaction (see `groupCommit`), each put is made at once, so a put that throws fails its own write alone.
   */
  putLast(db: Database, key: string, value: unknown): void;
  /** [collection, id] -> record. */
  records: Database<Doc, Key>;
  /** [collection, indexName, ...values, id] -> true. */
  indexes: Database<true, Key>;
  /** collection -> names of the indexes built for it, so that a newly declared index gets back-filled. */
  catalog: Database<string[], string>;
  /**
   * [collection, id, first item's position] -> the items of a record's appended field from that position on,
   * as one write added them (`CollectionSpec.appended`).
   */
  appended: Database<unknown[], Key>;
}

/** The main file (`store.mdb`): records, snapshots and the journal, with the read models' file beside it. */
export interface Env extends RecordsEnv {
  /**
   * The read models' file (`read-models.mdb`). Its batches need not wait for the main file: a journal entry the
   * projection runner can read is already durable (every commit is flushed before it becomes visible), so after
   * a crash a read model and its checkpoint are never ahead of the journal they were projected from.
   */
  readModels: RecordsEnv;
  /**
   * The next journal seq, inside a `batch` write only. The counter (`meta` key `journal.seq`) is read once per
   * group commit, inside its write transaction (under the writer lock, so across threads and processes seqs
   * follow commit order), counted up in memory and written back once before the commit. A write that rolls
   * back leaves a gap, which the journal allows.
   */
  nextSeq(): number;
  /** snapshot key -> the snapshot's header (version, fence, shard, deadline, time), without its data. */
  snapshots: Database<StoredSnapshot, string>;
  /**
   * snapshot key -> the snapshot's data (msgpack with shared shapes). Apart from the header so that the
   * compare-and-set of every step reads a few fields instead of decoding the whole snapshot.
   */
  snapshotData: Database<unknown, string>;
  /** [shard, deadline, snapshot key] -> true, for `due`. */
  deadlines: Database<true, Key>;
  /** seq -> journal entry (without its seq). */
  journal: Database<StoredEntry, number>;
  /** Key -> the ends of its chain of journal entries, for a key without a snapshot (`JournalEnds`). */
  journalHeads: Database<JournalEnds, string>;
  /** Counters: `journal.seq` is the last journal seq assigned. */
  meta: Database<number, string>;
}

/**
 * How both files are opened: without lmdb-js's default overlapping sync, so LMDB's own commit writes the
 * transaction's pages, flushes them (`fdatasync`) and only then writes the meta page that makes the commit
 * visible, all on lmdb-js's writer thread. A commit is durable when it resolves and before any reader (a
 * thread, another process, the projection runner) can see it. With overlapping sync a commit became visible
 * first and a separate `mdb_env_sync` made it durable: one more trip through libuv's pool and the event loop
 * before each answer, and the read models' batches had to wait for a flush of `store.mdb` to stay behind the
 * journal (bench/README.md, fifth session). `test/store.lmdb.test.ts` watches the order with strace.
 */
export const SYNCED = { overlappingSync: false } as const;

/** The message of lmdb-js 3.5.6's error for a write whose commit failed (its `commitError` says why). */
const COMMIT_FAILED = 'Commit failed (see commitError for details)';

/** LMDB's `MDB_PANIC`: the environment had a fatal error (a meta page could not be written); every later transaction fails. */
export const MDB_PANIC = -30795;

/** Whether `err` is lmdb-js's rejection of a write whose commit failed (a full disk, a file size limit, an I/O error). */
export function isCommitFailure(err: unknown): err is Error & { commitError?: Promise<unknown> } {
  return err instanceof Error && err.message === COMMIT_FAILED && 'commitError' in err;
}

/**
 * Called when a commit failed because the environment is unusable (`MDB_PANIC`): LMDB has marked it fatal and
 * refuses every later transaction until it is closed and opened again. The platform's threads set it
 * (`onEnvironmentPanic`) to end the process; the default ends this thread (the main thread's supervision of its
 * threads then ends the process).
 */
let panicked: (err: Error) => void = (err) => {
  process.stderr.write(`switchboard: fatal: the embedded store's environment failed and cannot be used until it is opened again: ${err.message}\n`);
  process.exit(70);
};
let panicReported = false;

/** Sets what this thread does when the embedded store's environment fails for good (see `panicked`). */
export function onEnvironmentPanic(handler: (err: Error) => void): void {
  panicked = handler;
}

/** Looks at why a commit failed (`commitError`, lmdb-js's shared rejection for the round): `MDB_PANIC` is fatal. */
function commitFailed(err: unknown): void {
  if (!isCommitFailure(err)) return;
  err.commitError?.then(undefined, (cause: unknown) => {
    if ((cause as { code?: unknown } | null)?.code !== MDB_PANIC || panicReported) return;
    panicReported = true;
    panicked(cause instanceof Error ? cause : new Error(String(cause)));
  });
}

let guarded = false;

/**
 * lmdb-js 3.5.6 rejects, on a failed commit, promises of its own that no caller holds: the commit promise of the
 * instruction that opens an event turn's batch (`writeBatchStart` in its write.js), and the `commitError` promise
 * shared by the round's failures. Every write of ours hears of the failure through its own promise (the group
 * commit rejects each, the request answers 5xx), but these orphans are unhandled rejections, which end the thread
 * they fall in: the projection thread, the edge thread, or the main thread. A main thread that ends while
 * lmdb-js's writer thread waits for it to finish its batch never ends at all: the exit joins libuv's thread
 * pool, whose writer waits on (docs/storage.md, "A full disk"). So each thread that opens the store treats
 * lmdb-js's commit failures as handled, and rethrows every other unhandled rejection, which ends the thread as
 * Node's default does.
 */
function guardCommitFailures(): void {
  if (guarded) return;
  guarded = true;
  process.on('unhandledRejection', (reason) => {
    if (isCommitFailure(reason)) {
      commitFailed(reason);
      return;
    }
    throw reason;
  });
}

/** Opens (creating when missing) the environments in `dataDir`. */
export function openEnv(dataDir: string): Env {
  guardCommitFailures();
  fs.mkdirSync(dataDir, { recursive: true });
  const root = open({ path: path.join(dataDir, 'store.mdb'), ...SYNCED });
  const meta = root.openDB<number, string>({ name: 'meta' });
  const seqs = new SeqCounter(meta);
  const readModels = open({ path: path.join(dataDir, 'read-models.mdb'), ...SYNCED });
  const records = recordsOf(root);
  const readModelRecords = recordsOf(readModels);
  const snapshots = root.openDB<StoredSnapshot, string>({ name: 'snapshots', ...SHARED_SHAPES });
  const journal = root.openDB<StoredEntry, number>({ name: 'journal', ...SHARED_SHAPES });
  const snapshotData = root.openDB<unknown, string>({ name: 'snapshot-data', ...SHARED_SHAPES });
  return Object.assign(records, groupCommit('store', root, seqs, [records.records, records.appended, snapshots, snapshotData, journal]), {
    readModels: Object.assign(readModelRecords, groupCommit('read-models', readModels, null, [readModelRecords.records, readModelRecords.appended])),
    nextSeq: () => seqs.next(),
    snapshots,
    snapshotData,
    deadlines: root.openDB<true, Key>({ name: 'deadlines' }),
    journal,
    journalHeads: root.openDB<JournalEnds, string>({ name: 'journal-heads' }),
    meta,
  });
}

/** Closes both files of an environment. */
export async function closeEnv(env: Env): Promise<void> {
  await env.root.close();
  await env.readModels.root.close();
}

function recordsOf(root: RootDatabase): Omit<RecordsEnv, 'batch' | 'putLast'> {
  return {
    root,
    records: root.openDB<Doc, Key>({ name: 'records', ...SHARED_SHAPES }),
    indexes: root.openDB<true, Key>({ name: 'indexes' }),
    catalog: root.openDB<string[], string>({ name: 'catalog' }),
    appended: root.openDB<unknown[], Key>({ name: 'appended', ...SHARED_SHAPES }),
  };
}

/** Thrown by a batch that must not commit before the second run of an earlier one (see `groupCommit`). */
class Deferred extends Error {}

/** The meta key holding the last journal seq assigned. */
export const SEQ_KEY = 'journal.seq';

/** The journal's seq counter during one group commit (see `Env.nextSeq`). */
class SeqCounter {
  private last: number | null = null;
  private inBatch = false;

  constructor(private readonly meta: Database<number, string>) {}

  begin(): void {
    this.inBatch = true;
    this.last = null;
  }

  next(): number {
    if (!this.inBatch) throw new Error('journal seqs are assigned inside a group commit only');
    this.last = (this.last ?? this.meta.get(SEQ_KEY) ?? 0) + 1;
    return this.last;
  }

  /** Writes the counter back (inside the batch's transaction, after its writes). */
  end(): void {
    if (this.last !== null) this.meta.putSync(SEQ_KEY, this.last);
    this.inBatch = false;
    this.last = null;
  }

  abort(): void {
    this.inBatch = false;
    this.last = null;
  }
}

/**
 * Makes the encoders of `dbs` reload their shared shapes from the file at their next use (their state when
 * opened): after a rolled-back write transaction, a shape they saved in it is not in the file, and a value
 * that used it would not decode.
 */
function forgetShapes(dbs: Database[]): void {
  for (const db of dbs) {
    const encoder = (db as unknown as { encoder?: { structures?: unknown[] & { uninitialized?: boolean }; clearSharedData?: () => void } }).encoder;
    if (!encoder?.structures || !encoder.clearSharedData) continue;
    encoder.clearSharedData();
    encoder.structures.uninitialized = true;
  }
}

interface Queued {
  write: () => unknown;
  resolve: (value: any) => void;
  reject: (err: unknown) => void;
}

/**
 * The group-commit queue of an environment (see `RecordsEnv.batch`). `seqs` is the journal's counter (the main
 * file only); `label` names its `SB_TIMINGS` figures.
 *
 * A batch's writes first run one after another in the batch's transaction. A write that throws (a duplicate,
 * a failed check) rolls that whole attempt back, and the batch runs again with each write in a child
 * transaction of its own, so that only the write that threw fails. Writes that throw are rare, and a child
 * transaction for every write cost each of them several microseconds of this thread's time under the writer
 * lock (bench/README.md, seventh session). A write must therefore be safe to run twice: each reads what it
 * checks inside the transaction, and the rolled-back attempt leaves nothing behind.
 *
 * Batches become durable in the order they were queued. lmdb-js runs the callbacks of every batch queued
 * while its writer was busy one after another in one transaction, so a batch queued after one that rolled
 * back would commit before that one's second run. It does not: until the second run begins, every batch
 * after it rolls back untouched (`Deferred`) and is queued again, behind the second run, when it hears so.
 * The host relies on this order to answer an ordered ask before its commit is durable (`AskOptions.ordered`).
 */
function groupCommit(label: string, root: RootDatabase, seqs: SeqCounter | null, shaped: Database[]): Pick<RecordsEnv, 'batch' | 'putLast'> {
  let queue: Queued[] = [];
  let queuedAt = 0;
  /** A batch rolled back by a write that threw, and its second run has not begun: later batches must wait. */
  let rerunPending = false;
  /**
   * The running batch's `putLast` values by database and key (null: no batch is running its writes together;
   * a batch running again puts each at once).
   */
  let last: Map<Database, Map<string, unknown>> | null = null;
  let inWrites = false;
  const putLast = (db: Database, key: string, value: unknown) => {
    if (!inWrites) throw new Error('putLast runs inside a batch write only');
    if (last === null) {
      db.putSync(key, value);
      return;
    }
    let values = last.get(db);
    if (!values) last.set(db, (values = new Map()));
    // Deleted first, so that the map's order (the order of the puts) is that of each key's last put.
    values.delete(key);
    values.set(key, value);
  };
  const flush = () => {
    const batch = queue;
    queue = [];
    const t0 = timings ? performance.now() : 0;
    if (timings) {
      timings.add(`${label}.batch wait`, t0 - queuedAt);
      timings.add(`${label}.batch size (count)`, batch.length);
    }
    commit(batch, false, t0);
  };
  const commit = (batch: Queued[], isolated: boolean, t0: number) => {
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; err: unknown }> = [];
    /** A write threw (so the attempt rolled back), as opposed to the commit failing. */
    let writeThrew = false;
    // Under SB_TIMINGS: when the writes began (the writer lock taken and this thread free to run them), then ended.
    let tw = 0;
    const writeAll = () => {
      if (isolated) rerunPending = false;
      else if (rerunPending) throw new Deferred();
      if (timings) {
        tw = performance.now();
        timings.add(`${label}.lock and turn wait`, tw - t0);
      }
      seqs?.begin();
      inWrites = true;
      last = isolated ? null : new Map();
      try {
        for (const q of batch) {
          if (!isolated) {
            outcomes.push({ ok: true, value: q.write() });
            continue;
          }
          try {
            // Nested in a write transaction, lmdb-js runs this as a child transaction: a throw aborts it alone.
            outcomes.push({ ok: true, value: root.transactionSync(q.write) });
          } catch (err) {
            forgetShapes(shaped);
            outcomes.push({ ok: false, err });
          }
        }
        if (last) for (const [db, values] of last) for (const [key, value] of values) db.putSync(key, value);
      } catch (err) {
        // Only a first run throws (a write, or a value put last): it rolls back and runs again, isolated.
        if (!isolated) {
          writeThrew = true;
          rerunPending = true;
        }
        throw err;
      } finally {
        inWrites = false;
        last = null;
      }
      seqs?.end();
      if (timings) {
        timings.since(`${label}.writes`, tw);
        tw = performance.now();
      }
    };
    // lmdb-js's asynchronous transaction: its writer thread takes the write lock and begins the transaction,
    // this thread runs `writeAll` in it, and the writer thread commits and flushes (`SYNCED`). The commit and
    // its fsync run off the event loop, so the next batch's turns run while this one is written. As a child
    // transaction, a throw in it rolls back everything it wrote (the seq counter's update included) and
    // nothing else that the writer thread commits with it.
    root.childTransaction(writeAll).then(
      () => {
        if (timings) {
          timings.since(`${label}.commit (durable)`, t0);
          timings.since(`${label}.writes to durable`, tw);
        }
        batch.forEach((q, i) => {
          const o = outcomes[i];
          if (o.ok) q.resolve(o.value);
          else q.reject(o.err);
        });
      },
      (err) => {
        seqs?.abort();
        // A second run that failed to commit holds nothing up any more (its writes are refused below).
        if (isolated) rerunPending = false;
        // Rolled back before writing anything: queued again, behind the second run of the batch before it.
        if (err instanceof Deferred) {
          if (timings) timings.add(`${label}.batches deferred (count)`, 1);
          commit(batch, false, t0);
          return;
        }
        forgetShapes(shaped);
        commitFailed(err);
        if (writeThrew) {
          if (timings) timings.add(`${label}.batches run again (count)`, 1);
          commit(batch, true, t0);
          return;
        }
        for (const q of batch) q.reject(err);
      },
    );
  };
  const batch = <T>(write: () => T) =>
    new Promise<T>((resolve, reject) => {
      if (queue.length === 0) {
        setImmediate(flush);
        if (timings) queuedAt = performance.now();
      }
      queue.push({ write, resolve, reject });
    });
  return { batch, putLast };
}
