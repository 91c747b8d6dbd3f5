import { Binary, type Collection as MongoCollectionHandle } from 'mongodb';
import type { SnapshotPut, SnapshotPutResult, SnapshotRecord, SnapshotStore, SnapshotWrite } from '../types.js';
import { isDuplicateKey } from './collection.js';

/** A snapshot document: the snapshot key is `_id`. */
export interface SnapshotDoc {
  _id: string;
  version: number;
  fence: number;
  shard: number;
  deadline: number | null;
  data: Binary;
  updated_at: number;
}

/**
 * Snapshots in one MongoDB collection. The compare-and-set is a single conditional write (an insert for
 * version 0, else an update matching version and fence), so it is atomic on the server.
 */
export class MongoSnapshots implements SnapshotStore {
  constructor(private readonly handle: MongoCollectionHandle<SnapshotDoc>) {}

  async get(key: string): Promise<SnapshotRecord | null> {
    const doc = await this.handle.findOne({ _id: key });
    if (!doc) return null;
    const { _id, data, ...rest } = doc;
    return { key: _id, ...rest, data: data.value() };
  }

  async put(key: string, data: Uint8Array, put: SnapshotPut): Promise<SnapshotPutResult> {
    const version = put.expectedVersion + 1;
    const fields = {
      version,
      fence: put.fence,
      shard: put.shard,
      deadline: put.deadline,
      data: new Binary(data),
      updated_at: Date.now(),
    };
    try {
      if (put.expectedVersion === 0) {
        await this.handle.insertOne({ _id: key, ...fields });
        return { ok: true, version };
      }
      const result = await this.handle.updateOne(
        { _id: key, version: put.expectedVersion, fence: { $lte: put.fence } },
        { $set: fields },
      );
      if (result.matchedCount === 1) return { ok: true, version };
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
    // The write lost; report why from the snapshot as it is now (fence first, as the embedded store does).
    const stored = await this.handle.findOne({ _id: key }, { projection: { version: 1, fence: 1 } });
    const current = { version: stored?.version ?? 0, fence: stored?.fence ?? 0 };
    return { ok: false, reason: stored && put.fence < stored.fence ? 'fence' : 'version', current };
  }

  /** MongoDB has no cheap multi-document compare-and-set; the writes go one by one, concurrently. */
  putMany(writes: SnapshotWrite[]): Promise<SnapshotPutResult[]> {
    return Promise.all(writes.map(({ key, data, ...put }) => this.put(key, data, put)));
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

  async delete(key: string): Promise<void> {
    await this.handle.deleteOne({ _id: key });
  }
}
