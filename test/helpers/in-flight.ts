import type { Store } from '../../store/mod.js';

/** The collection methods that write one record: what `countWritesInFlight` counts. */
const WRITES = new Set<PropertyKey>(['update', 'putNewer', 'insert']);

/**
 * `store` with the writes (`update`, `putNewer`, `insert`) of one collection counted while they are in flight:
 * `most()` is the largest number in flight at once. Writes issued in the same event-loop turn share one group
 * commit of the real store, so this tells whether a component issues its writes together or one after another.
 */
export function countWritesInFlight(store: Store, collection: string): { store: Store; most: () => number } {
  let inFlight = 0;
  let most = 0;
  const watched = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== 'collection') return Reflect.get(target, prop, receiver);
      return (spec: Parameters<Store['collection']>[0]) => {
        const c = target.collection(spec);
        if (spec.name !== collection) return c;
        return new Proxy(c, {
          get(ct, cp, cr) {
            if (!WRITES.has(cp)) return Reflect.get(ct, cp, cr);
            const write = Reflect.get(ct, cp, cr) as (...args: unknown[]) => Promise<unknown>;
            return async (...args: unknown[]) => {
              most = Math.max(most, ++inFlight);
              try {
                return await write.apply(ct, args);
              } finally {
                inFlight--;
              }
            };
          },
        });
      };
    },
  });
  return { store: watched, most: () => most };
}
