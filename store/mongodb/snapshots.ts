import { Binary, type ClientSession, type Collection as MongoCollectionHandle } from 'mongodb';
import { Packr } from 'msgpackr';
import type { JournalStep, SnapshotPut, SnapshotPutResult, SnapshotRecord, SnapshotStore, SnapshotWrite } from '../types.js';
import { stepEntry } from '../journal-entry.js';
import { isDuplicateKey } from './collection.js';
import type { MongoJournal } from './journal.js';

/** A snapshot document: the snapshot key is `_id`. */
export interface SnapshotDoc {
  _id: string;
  version: number;
  fence: number;
  shard: number;
  deadline: number | null;
  data: Binary;
  updated_at: number;
  writer?: number;
}

/**
 * The state is stored as msgpack with records defined inline (no shared structures to keep in step across
 * processes), so every document decodes on its own.
 */
const packr = new Packr({ useRecords: true });

/** Thrown inside a transaction to abort it when the compare-and-set did not match. */
class Lost extends Error {}

/**
 * Snapshots in one MongoDB collection. The compare-and-set is a single conditional write (an insert for
 * version 0, else an update matching version and fence), so it is atomic on the server. A write with a
 * `step` runs in a transaction with its journal entry (`journal.ts`): both commit or neither.
 */
export class MongoSnapshots implements SnapshotStore {
  /** Batches are separate bulk writes, which may complete out of order. */
  readonly durableInOrder = false;

  constructor(
    private readonly handle: MongoCollectionHandle<SnapshotDoc>,
    private readonly journal: MongoJournal,
    private readonly withSession: <T>(work: (session: ClientSession) => Promise<T>) => Promise<T>,
  ) {}

  async get(key: string): Promise<SnapshotRecord | null> {
    const doc = await this.handle.findOne({ _id: key });
    if (!doc) return null;
    const { _id, data, ...rest } = doc;
    return { key: _id, ...rest, data: packr.unpack(data.value()) };
  }

  async put(key: string, data: unknown, put: SnapshotPut, step?: JournalStep): Promise<SnapshotPutResult> {
    const version = put.expectedVersion + 1;
    const at = Date.now();
    const fields = {
      version,
      fence: put.fence,
      shard: put.shard,
      deadline: put.deadline,
      data: new Binary(packr.pack(data)),
      updated_at: at,
      ...(put.writer !== undefined ? { writer: put.writer } : {}),
    };
    // A chained put with no writer can match nothing (as in the embedded store).
    if (put.chained && put.writer === undefined) return this.lost(key, put);
    const write = async (session?: ClientSession): Promise<boolean> => {
      // A chained put never creates: the writer's own put came first.
      if (put.expectedVersion === 0 && !put.chained) {
        await this.handle.insertOne({ _id: key, ...fields }, { session });
        return true;
      }
      const result = await this.handle.updateOne(
        { _id: key, version: put.expectedVersion, fence: { $lte: put.fence }, ...(put.chained ? { writer: put.writer } : {}) },
        // A put that names no writer leaves none behind, as the embedded store's whole header does.
        put.writer === undefined ? { $set: fields, $unset: { writer: '' } } : { $set: fields },
        { session },
      );
      return result.matchedCount === 1;
    };
    try {
      if (!step) {
        if (await write()) return { ok: true, version };
      } else {
        const entry = stepEntry(key, put.shard, version, at, step);
        // The callback may run again on a transient error (a write conflict), so it does everything anew.
        let seq = 0;
        await this.withSession((session) =>
          session.withTransaction(async () => {
            if (!(await write(session))) throw new Lost();
            seq = await this.journal.appendIn(session, entry);
          }),
        );
        return { ok: true, version, seq, at };
      }
    } catch (error) {
      if (!(error instanceof Lost) && !isDuplicateKey(error)) throw error;
    }
    return this.lost(key, put);
  }

  /** The write lost; why, from the snapshot as it is now (fence first, as the embedded store does). */
  private async lost(key: string, put: SnapshotPut): Promise<SnapshotPutResult> {
    const stored = await this.handle.findOne({ _id: key }, { projection: { version: 1, fence: 1 } });
    const current = { version: stored?.version ?? 0, fence: stored?.fence ?? 0 };
    return { ok: false, reason: stored && put.fence < stored.fence ? 'fence' : 'version', current };
  }

  /** MongoDB has no cheap multi-document compare-and-set; the writes go one by one, concurrently. */
  putMany(writes: SnapshotWrite[]): Promise<SnapshotPutResult[]> {
    return Promise.all(writes.map(({ key, data, step, ...put }) => this.put(key, data, put, step)));
  }

  async due(shards: number[], before: number, limit: number): Promise<Array<{ key: string; deadline: number }>> {
    if (limit <= 0) return [];
    const docs = await this.handle
      .find({ shard: { $in: shards }, deadline: { $ne: null, $lte: before } }, { projection: { deadline: 1 } })
      .sort({ deadline: 1, _id: 1 })
      .limit(limit)
      .toArray();
    return docs.map((doc) => ({ key: doc._id, deadline: doc.deadline as number }));
  }

  async highestFence(): Promise<number> {
    const [top] = await this.handle.find({}, { projection: { fence: 1 } }).sort({ fence: -1 }).limit(1).toArray();
    return top?.fence ?? 0;
  }

  async delete(key: string): Promise<void> {
    await this.handle.deleteOne({ _id: key });
  }
}
