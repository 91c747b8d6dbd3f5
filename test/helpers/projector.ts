/**
 * The tests' projector (loaded through `PROJECTION_MODULES`): per counter actor, the steps and the
 * `counter.incremented` events it has applied, chained by version so that an entry applied twice changes
 * nothing and a lost entry stops the chain. It also records, per entry, the process that applied it and
 * how often it saw it again, so a test can tell which runner applied what.
 */
import type { Doc, JournalEntry, Store } from '../../store/mod.js';
import type { Projector } from '../../actors/mod.js';

export const COUNTS = 'test_projection_counts';
export const APPLIED = 'test_projection_applied';

export interface CountDoc extends Doc {
  version: number;
  steps: number;
  incremented: number;
}

/** The per-counter read model, as the projector and the tests that read it declare it. */
export const countsOf = (store: Store) => store.collection<CountDoc>({ name: COUNTS, readModel: true });
/** Which process applied each entry, and how often it saw it again. */
export const appliedOf = (store: Store) => store.collection<{ id: string; pid: number; shard: number; again: number }>({ name: APPLIED, readModel: true });

async function applyOne(store: Store, e: JournalEntry): Promise<void> {
  const counts = countsOf(store);
  const incremented = e.events.filter((ev) => ev.type === 'counter.incremented').length;
  const chained = await counts.update({ id: e.key, version: e.version - 1 }, { $set: { version: e.version }, $inc: { steps: 1, incremented } });
  if (!chained && e.version === 1) await counts.insert({ id: e.key, version: 1, steps: 1, incremented }).catch(() => undefined);
  const applied = appliedOf(store);
  await applied.insert({ id: String(e.seq), pid: process.pid, shard: e.shard, again: 0 }).catch(() => applied.update({ id: String(e.seq) }, { $inc: { again: 1 } }));
}

export const countsProjector: Projector = {
  name: 'test-counts',
  kinds: ['counter'],
  async apply(entries, store) {
    // One actor's entries in order; different actors at once (their writes share group commits).
    const byActor = new Map<string, JournalEntry[]>();
    for (const e of entries) byActor.set(e.key, [...(byActor.get(e.key) ?? []), e]);
    await Promise.all([...byActor.values()].map(async (list) => {
      for (const e of list) await applyOne(store, e);
    }));
  },
  async reset(store) {
    await countsOf(store).delete({});
    await appliedOf(store).delete({});
  },
};

export function projectors(): Projector[] {
  return [countsProjector];
}
