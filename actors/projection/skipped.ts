import type { Collection, Doc, Store } from '../../store/mod.js';

/**
 * An entry the runner set aside for a projector (collection `projection_skipped`, id `<projection>:<epoch>:<seq>`):
 * its projection failed on every attempt, so the projector's checkpoint moved past it. Kept for the operator
 * (`switchboard rebuild <projection>` projects it again once the cause is fixed); the projector's checkpoint record
 * counts them (`CheckpointDoc.skipped`).
 */
export interface SkippedDoc extends Doc {
  projection: string;
  /** The projector's epoch when it was set aside (a rebuild starts a new one, and projects it again). */
  epoch: number;
  seq: number;
  /** The entry's actor key (`conversation/<id>`, `edge/<process>`...). */
  key: string;
  /** The failure's name and message (at most `ERROR_CHARS`), no stack. */
  error: string;
  /** When it was set aside (ms since epoch). */
  at: number;
}

/** The longest failure message stored. */
const ERROR_CHARS = 1_000;

/** The entries set aside, one record each. */
export class Skipped {
  readonly records: Collection<SkippedDoc>;

  constructor(store: Store) {
    this.records = store.collection<SkippedDoc>({ name: 'projection_skipped', readModel: true, indexes: [{ fields: ['projection', 'seq'] }] });
  }

  /**
   * Records an entry set aside. Idempotent: a runner that sets the same entry aside again (its checkpoint was not
   * saved: a crash, a failed save) updates the record.
   */
  async record(entry: { projection: string; epoch: number; seq: number; key: string; error: string }): Promise<void> {
    const id = `${entry.projection}:${entry.epoch}:${entry.seq}`;
    await this.records.update({ id }, { $set: { projection: entry.projection, epoch: entry.epoch, seq: entry.seq, key: entry.key, error: entry.error.slice(0, ERROR_CHARS), at: Date.now() } }, { upsert: true });
  }
}
