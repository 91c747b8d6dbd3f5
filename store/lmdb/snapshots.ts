import type { SnapshotPut, SnapshotPutResult, SnapshotRecord, SnapshotStore, SnapshotWrite } from '../types.js';
import type { Env } from './env.js';
import { stepEntry } from '../journal-entry.js';
import { appendInTransaction, type JournalEnds } from './journal.js';
import { END, idOf, isKeyString, key } from './keys.js';

/**
 * A snapshot's header as stored under its key (its data is stored apart: `Env.snapshotData`), with the ends of
 * the actor's chain of journal entries (`JournalEnds`) once it has one.
 */
export type StoredSnapshot = Omit<SnapshotRecord, 'key' | 'data'> & { journal?: JournalEnds };

/**
 * Snapshots of the embedded store. Each stored deadline has a `[shard, deadline, key]` entry in the
 * `deadlines` sub-database, written and removed in the same transaction as the snapshot, so `due` is a
 * range read per shard. A write that carries a `step` appends its journal entry in that same transaction,
 * after its compare-and-set succeeded, so a snapshot version and its entry are durable together or not at all.
 */
export class LmdbSnapshots implements SnapshotStore {
  /** One writer per file, and `Env.batch` keeps commits in queue order. */
  readonly durableInOrder = true;

  constructor(private readonly env: Env) {}

  async get(snapshotKey: string): Promise<SnapshotRecord | null> {
    if (!isKeyString(snapshotKey)) return null;
    // Read back to back, in one synchronous run: lmdb-js reads both from the same read transaction, so the
    // header and the data are of the same version (both are written in one write transaction).
    const stored = this.env.snapshots.get(snapshotKey);
    if (!stored) return null;
    // Decoded afresh: the caller's to keep. The journal's ends are the store's own.
    const { journal: _, ...header } = stored;
    return { key: snapshotKey, ...header, data: this.env.snapshotData.get(snapshotKey) ?? null };
  }

  async put(snapshotKey: string, data: unknown, put: SnapshotPut): Promise<SnapshotPutResult> {
    const [result] = await this.putMany([{ key: snapshotKey, data, ...put }]);
    return result;
  }

  async putMany(writes: SnapshotWrite[]): Promise<SnapshotPutResult[]> {
    for (const w of writes) {
      if (!isKeyString(w.key)) throw new TypeError(`invalid snapshot key ${JSON.stringify(w.key)}`);
      if (w.deadline !== null && !Number.isFinite(w.deadline)) throw new TypeError('a deadline must be finite or null');
    }
    // One write transaction for the whole batch (`Env.batch`): the compare-and-sets run inside LMDB's write
    // lock (atomic across processes too) and one flushed commit covers every write.
    return this.env.batch(() => writes.map((w) => this.putInTransaction(w)));
  }

  private putInTransaction(w: SnapshotWrite): SnapshotPutResult {
    const { snapshots, snapshotData, deadlines, journalHeads } = this.env;
    const shard = positiveZero(w.shard);
    const deadline = w.deadline === null ? null : positiveZero(w.deadline);
    const stored = snapshots.get(w.key);
    const current = { version: stored?.version ?? 0, fence: stored?.fence ?? 0 };
    // A writer holding an older lease must not overwrite a newer owner's state, whatever version it read.
    if (stored && w.fence < stored.fence) return { ok: false, reason: 'fence', current };
    if (current.version !== w.expectedVersion) return { ok: false, reason: 'version', current };
    if (w.chained && (w.writer === undefined || stored?.writer !== w.writer)) return { ok: false, reason: 'version', current };
    // An unchanged entry is left as it is: the host keeps an actor's entry while its deadline only moves later.
    const moved = !stored || stored.deadline !== deadline || stored.shard !== shard;
    if (moved && stored && stored.deadline !== null) deadlines.removeSync(key(stored.shard, stored.deadline, w.key));
    const version = w.expectedVersion + 1;
    const at = Date.now();
    const header: StoredSnapshot = { version, fence: w.fence, shard, deadline, updated_at: at };
    if (w.writer !== undefined) header.writer = w.writer;
    // The journal's ends move into the header from `journalHeads` with the first step after a delete.
    let ends = stored?.journal;
    if (!ends && (ends = journalHeads.get(w.key))) journalHeads.removeSync(w.key);
    let seq: number | undefined;
    if (w.step) {
      ends = appendInTransaction(this.env, stepEntry(w.key, shard, version, at, w.step), ends);
      seq = ends[1];
    }
    if (ends) header.journal = ends;
    snapshots.putSync(w.key, header);
    // The data of a key stepped again in the same batch is encoded and written once, the last version's.
    this.env.putLast(snapshotData, w.key, w.data);
    if (moved && deadline !== null) deadlines.putSync(key(shard, deadline, w.key), true);
    return seq === undefined ? { ok: true, version } : { ok: true, version, seq, at };
  }

  async due(shards: number[], before: number, limit: number): Promise<Array<{ key: string; deadline: number }>> {
    if (limit <= 0) return [];
    const due: Array<{ key: string; deadline: number }> = [];
    for (const shard of new Set(shards)) {
      // Each shard's range is in deadline order, so its first `limit` entries are all it can contribute.
      const entries = this.env.deadlines.getKeys({
        start: key(positiveZero(shard)),
        end: key(positiveZero(shard), positiveZero(before), END),
        limit,
      });
      for (const entry of entries) due.push({ key: idOf(entry), deadline: (entry as unknown[])[1] as number });
    }
    due.sort((a, b) => a.deadline - b.deadline || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return due.slice(0, limit);
  }

  async highestFence(): Promise<number> {
    // One pass over the headers (not the data): run once, when an embedded worker starts.
    let highest = 0;
    for (const { value } of this.env.snapshots.getRange()) if (value.fence > highest) highest = value.fence;
    return highest;
  }

  async delete(snapshotKey: string): Promise<void> {
    if (!isKeyString(snapshotKey)) return;
    this.env.root.transactionSync(() => {
      const stored = this.env.snapshots.get(snapshotKey);
      if (!stored) return;
      if (stored.deadline !== null) this.env.deadlines.removeSync(key(stored.shard, stored.deadline, snapshotKey));
      // The actor's journal outlives its snapshot.
      if (stored.journal) this.env.journalHeads.putSync(snapshotKey, stored.journal);
      this.env.snapshots.removeSync(snapshotKey);
      this.env.snapshotData.removeSync(snapshotKey);
    });
  }
}

/** -0 has its own key encoding (sorting after every number) but means 0. */
function positiveZero(n: number): number {
  return n === 0 ? 0 : n;
}
