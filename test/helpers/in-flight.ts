import type { Store } from '../../store/mod.js';

/**
 * `store` with the `update`s of one collection counted while they are in flight: `most()` is the largest number
 * in flight at once. Writes issued in the same event-loop turn share one group commit of the real store, so this
 * tells whether a component issues its writes together or one after another.
 */
export function countUpdatesInFlight(store: Store, collection: string): { store: Store; most: () => number } {
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
            if (cp !== 'update') return Reflect.get(ct, cp, cr);
            return async (...args: Parameters<typeof c.update>) => {
              most = Math.max(most, ++inFlight);
              try {
                return await ct.update(...args);
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
