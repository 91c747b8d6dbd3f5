/**
 * The persistence layer: named record collections and the actor snapshot store, behind one interface
 * (`types.ts`) with two backends. The embedded LMDB backend is the default and needs nothing installed;
 * the MongoDB backend is for deployments whose nodes do not share a disk.
 */
import { openLmdbStore } from './lmdb/store.js';
import type { Store } from './types.js';
export { onEnvironmentPanic } from './lmdb/env.js';
/**
 * `matcher(filter)`: a predicate that tests a record against a filter document as every backend's queries do
 * (MongoDB's semantics; the embedded store's own matcher), for a caller that reads records by one part of a
 * filter (the part an index serves) and must keep those that pass the whole of it.
 */
export { matcher } from './lmdb/matcher.js';

export * from './errors.js';
export type * from './types.js';

export interface StoreOptions {
  /** Directory of the embedded store (created when missing); unused with `mongodbUrl`. */
  dataDir: string;
  /** When set, the store is this MongoDB deployment instead of the embedded one. */
  mongodbUrl?: string;
}

/** Opens the MongoDB store when `mongodbUrl` is set, else the embedded LMDB store in `dataDir`. */
export async function openStore(options: StoreOptions): Promise<Store> {
  if (options.mongodbUrl) {
    // Loaded on demand: the embedded default should not pay for loading the MongoDB driver.
    const { openMongoStore } = await import('./mongodb/store.js');
    return openMongoStore({ url: options.mongodbUrl });
  }
  return openLmdbStore({ dataDir: options.dataDir });
}
