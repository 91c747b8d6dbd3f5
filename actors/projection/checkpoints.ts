import { StoreDuplicateError, type Collection, type Doc, type Store } from '../../store/mod.js';

/** A runner's recent commit-to-applied lag, as it last reported it. */
export interface RunnerLag {
  p50: number;
  p99: number;
  samples: number;
  /** When it was reported (ms since epoch). */
  at: number;
}

/**
 * One projector's checkpoint record (collection `projection_checkpoints`, id = the projector's name):
 * for each partition, the seq up to which every entry of that partition is applied. `epoch` grows with
 * each rebuild; a runner saves only under the epoch it read, so a rebuild cannot be overwritten by a runner
 * that was half-way through a batch.
 */
export interface CheckpointDoc extends Doc {
  epoch: number;
  /**
   * A rebuild was asked for and the projector is not reset yet: no runner applies it, and the runner of
   * partition 0 resets it between two of its batches (`ProjectionRunner`), then clears this. The reset is
   * not made where the rebuild is asked for (the admin API's thread): a runner half-way through a batch
   * wrote the rest of the batch after it (a record after the reset, its document and postings before),
   * and the replay took that record for proof that the conversation was projected, and skipped it.
   */
  resetting?: boolean;
  /** Partition number (as a string key) -> seq. A missing partition is at 0. */
  partitions: Record<string, number>;
  /** Runner id -> its lag figures. */
  runners: Record<string, RunnerLag>;
  /** Entries set aside in this epoch: they failed on every attempt (`projection_skipped`, `skipped.ts`). */
  skipped?: number;
  updated_at: number;
}

/** The checkpoints of every projector. */
export class Checkpoints {
  readonly records: Collection<CheckpointDoc>;

  constructor(store: Store) {
    this.records = store.collection<CheckpointDoc>({ name: 'projection_checkpoints', readModel: true });
  }

  /** The projector's checkpoint record, created at epoch 0 when it has none yet. */
  async load(name: string): Promise<CheckpointDoc> {
    const stored = await this.records.get(name);
    if (stored) return stored;
    const fresh: CheckpointDoc = { id: name, epoch: 0, partitions: {}, runners: {}, updated_at: Date.now() };
    try {
      return await this.records.insert(fresh);
    } catch (err) {
      // Another runner created it at the same moment.
      if (err instanceof StoreDuplicateError) return (await this.records.get(name))!;
      throw err;
    }
  }

  /**
   * Moves the given partitions' checkpoints (and records the runner's lag, and counts the entries it set aside
   * in the batch) if the record is still at `epoch`; false when a rebuild moved it on meanwhile (nothing is
   * written).
   */
  async save(name: string, epoch: number, partitions: Map<number, number>, runner?: { id: string; lag: RunnerLag }, stale: string[] = [], skipped = 0): Promise<boolean> {
    const set: Record<string, unknown> = { updated_at: Date.now() };
    for (const [p, seq] of partitions) set[`partitions.${p}`] = seq;
    if (runner) set[`runners.${runner.id}`] = runner.lag;
    const update: Record<string, unknown> = { $set: set };
    if (skipped) update.$inc = { skipped };
    if (stale.length) update.$unset = Object.fromEntries(stale.map((id) => [`runners.${id}`, '']));
    return (await this.records.update({ id: name, epoch }, update)) !== null;
  }

  /** Runners that have not reported for ten minutes (stopped processes): dropped at the next save. */
  static stale(doc: CheckpointDoc, now: number): string[] {
    return Object.entries(doc.runners ?? {}).filter(([, r]) => now - r.at > 600_000).map(([id]) => id);
  }

  /**
   * Starts a projector over: every partition back to 0, in a new epoch, to be reset by a runner first
   * (`resetting`), with no entry set aside yet (the replay projects those of the old epoch again). A runner in
   * the middle of a batch cannot save under the new epoch.
   */
  async restart(name: string): Promise<number> {
    const doc = await this.records.update({ id: name }, { $set: { partitions: {}, runners: {}, skipped: 0, resetting: true, updated_at: Date.now() }, $inc: { epoch: 1 } }, { upsert: true });
    return doc!.epoch;
  }

  /**
   * The runner has reset the projector for `epoch`: runners may replay it. Null when another rebuild was asked
   * for meanwhile (the record is at a later epoch, to be reset again).
   */
  async resetDone(name: string, epoch: number): Promise<CheckpointDoc | null> {
    return this.records.update({ id: name, epoch, resetting: true }, { $unset: { resetting: '' }, $set: { updated_at: Date.now() } });
  }
}
