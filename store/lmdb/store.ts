import { redeclared } from '../errors.js';
import type { Collection, CollectionSpec, Doc, Store } from '../types.js';
import { LmdbCollection } from './collection.js';
import { closeEnv, openEnv, type Env } from './env.js';
import { ensureIndexes, indexDef } from './indexes.js';
import { LmdbJournal } from './journal.js';
import { isKeyString } from './keys.js';
import { LmdbSnapshots } from './snapshots.js';

export interface LmdbStoreOptions {
  /** Directory holding `store.mdb` and `read-models.mdb` (and their lock files); created when missing. */
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
      const file = spec.readModel ? env.readModels : env;
      const appended = spec.appended ?? null;
      if (appended !== null && defs.some((def) => def.fields.some((f) => f === appended || f.startsWith(`${appended}.`)))) {
        throw new TypeError(`collection ${spec.name}: no index may name its appended field ${appended}`);
      }
      if (!collection) {
        ensureIndexes(file, spec.name, defs);
        collection = new LmdbCollection(file, spec.name, defs, appended);
        collections.set(spec.name, collection);
      } else if (collection.indexes.map((def) => def.name).join('\n') !== defs.map((def) => def.name).join('\n')) {
        throw redeclared(spec, 'indexes');
      } else if (collection.env !== file) {
        throw redeclared(spec, 'readModel');
      } else if (collection.appended !== appended) {
        throw redeclared(spec, 'appended');
      }
      return collection as unknown as Collection<T>;
    },
    refresh: () => {
      env.records.resetReadTxn();
      env.readModels.records.resetReadTxn();
    },
    otherProcesses: () => otherProcesses(env),
    close: () => closeEnv(env),
  };
}

/**
 * The pids in both files' reader tables other than this process's, after LMDB has cleared the slots of
 * processes that ended (`readerCheck`). A process's threads share its pid.
 */
function otherProcesses(env: Env): number[] {
  const pids = new Set<number>();
  for (const root of [env.root, env.readModels.root]) {
    root.readerCheck();
    // Lines of `pid thread txnid` under a header line.
    for (const line of root.readerList().split('\n').slice(1)) {
      const pid = Number(line.trim().split(/\s+/)[0]);
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid) pids.add(pid);
    }
  }
  return [...pids].sort((a, b) => a - b);
}
