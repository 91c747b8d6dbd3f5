/**
 * The projection-lag benchmark's stand-in read model (loaded through `PROJECTION_MODULES`), until the real
 * projectors are registered: per conversation, its latest step (version, state value, event count), written
 * with `putNewer` (idempotent, never back in time): one write per conversation per batch (its newest entry), a
 * batch's writes in one group commit.
 */
import type { Projector } from '../actors/mod.js';
import type { Store } from '../store/mod.js';

const stepsOf = (store: Store) => store.collection({ name: 'bench_conversation_steps', readModel: true });

export const benchProjector: Projector = {
  name: 'bench-conversation-steps',
  kinds: ['conversation'],
  async apply(entries, store) {
    const steps = stepsOf(store);
    const newest = new Map<string, (typeof entries)[number]>();
    for (const e of entries) newest.set(e.key, e);
    await Promise.all([...newest.values()].map((e) => steps.putNewer({ id: e.key, version: e.version, value: JSON.stringify(e.value), events: e.events.length, at: e.at }, 'version')));
  },
  async reset(store) {
    await stepsOf(store).delete({});
  },
};

export function projectors(): Projector[] {
  return [benchProjector];
}
