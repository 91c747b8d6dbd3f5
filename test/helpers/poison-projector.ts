/**
 * A test projector (loaded through `PROJECTION_MODULES`) with a poisoned entry: it throws on every batch that
 * holds a `poison` entry whose id is `bad`, as the conversations projector did on a tenant's text that overflowed
 * the stemmer's stack. It records the seq of every other `poison` entry it applied.
 */
import type { Store } from '../../store/mod.js';
import type { Projector } from '../../actors/mod.js';

/** The seqs applied (id = seq). */
export const poisonAppliedOf = (store: Store) => store.collection<{ id: string; key?: string }>({ name: 'test_poison_applied', readModel: true });

export const poisonProjector: Projector = {
  name: 'test-poison',
  kinds: ['poison'],
  async apply(entries, store) {
    if (entries.some((e) => e.id === 'bad')) throw new RangeError('Maximum call stack size exceeded');
    for (const e of entries) await poisonAppliedOf(store).update({ id: String(e.seq) }, { $set: { key: e.key } }, { upsert: true });
  },
  async reset(store) {
    await poisonAppliedOf(store).delete({});
  },
};

export function projectors(): Projector[] {
  return [poisonProjector];
}
