import type { Collection, CollectionSpec, Doc, Store } from '../types.js';
import { LmdbCollection } from './collection.js';
import { openEnv } from './env.js';
import { ensureIndexes, indexDef } from './indexes.js';
import { LmdbJournal } from './journal.js';
import { isKeyString } from './keys.js';
import { LmdbSnapshots } from './snapshots.js';

export interface LmdbStoreOptions {
  /** Directory holding `store.mdb` (and its lock file); created when missing. */
  dataDir: string;
}

/**
 * Opens the embedded store in `dataDir`. Several processes may open the same directory at once: writes
 * are serialised by LMDB's process-shared writer lock, and they must declare the same collection indexes.
 */
export async function openLmdbStore(options: LmdbStoreOptions): Promise<Store> {
  const env = openEnv(options.dataDir);
  const collections = new Map<string, LmdbCollection>();
  return {
    backend: 'lmdb',
    snapshots: new LmdbSnapshots(env),
    journal: new LmdbJournal(env),
    collection<T extends Doc = Doc>(spec: CollectionSpec): Collection<T> {
      if (!isKeyString(spec.name)) throw new TypeError(`invalid collection name ${JSON.stringify(spec.name)}`);
      const defs = (spec.indexes ?? []).map(indexDef);
      let collection = collections.get(spec.name);
      if (!collection) {
        ensureIndexes(env, spec.name, defs);
        collection = new LmdbCollection(env, spec.name, defs);
        collections.set(spec.name, collection);
      } else if (collection.indexes.map((def) => def.name).join('\n') !== defs.map((def) => def.name).join('\n')) {
        throw new Error(`collection ${spec.name} is already declared with other indexes`);
      }
      return collection as unknown as Collection<T>;
    },
    close: () => env.root.close(),
  };
}
