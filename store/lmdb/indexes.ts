/**
 * Secondary indexes of the embedded store: one key per record and index in the `indexes` sub-database.
 * Every function that writes must run inside a write transaction (`transactionSync`).
 */
import { compareKeys, type Key } from 'lmdb';
import { dataEqual } from './equal.js';
import { valueAt } from '../cursor.js';
import { StoreDuplicateError } from '../errors.js';
import type { Doc, IndexSpec } from '../types.js';
import type { RecordsEnv } from './env.js';
import { END, SPILL, idOf, key, keyValue, type KeyValue } from './keys.js';

export interface IndexDef {
  /** Carries the options, so that changing them builds a new index and drops the old one. */
  name: string;
  fields: string[];
  unique: boolean;
  /** Only meaningful with `unique`. */
  sparse: boolean;
}

/** Validates and names an index declaration. */
export function indexDef(spec: IndexSpec): IndexDef {
  if (spec.fields.length === 0) throw new TypeError('an index needs at least one field');
  const unique = spec.unique === true;
  const sparse = unique && spec.sparse === true;
  const name = spec.fields.join(',') + (sparse ? ' unique sparse' : unique ? ' unique' : '');
  return { name, fields: [...spec.fields], unique, sparse };
}

/**
 * The key of `doc`'s entry in index `def`. A field without a key form (see `keyValue`), including a
 * dotted path that runs into an array, puts the record under SPILL.
 */
export function entryKey(collection: string, def: IndexDef, doc: Doc): Key {
  const values = def.fields.map((field) => keyValue(valueAt(doc, field)));
  return values.every((value): value is KeyValue => value !== undefined)
    ? key(collection, def.name, ...values, doc.id)
    : key(collection, def.name, SPILL, doc.id);
}

/** The indexed values compared for uniqueness: missing counts as null, as in MongoDB. */
function tuple(def: IndexDef, doc: Doc): unknown[] {
  return def.fields.map((field) => valueAt(doc, field) ?? null);
}

/**
 * Throws `StoreDuplicateError` when another record holds the same values as `doc` under unique index
 * `def`. Entries sharing `doc`'s key prefix are only candidates (strings are truncated in keys, SPILL
 * entries share one prefix), so their records are compared value by value.
 */
function assertUnique(env: RecordsEnv, collection: string, def: IndexDef, doc: Doc): void {
  const values = tuple(def, doc);
  if (def.sparse && values.some((value) => value === null)) return;
  const prefix = (entryKey(collection, def, doc) as unknown[]).slice(0, -1) as Array<KeyValue | symbol>;
  for (const other of env.indexes.getKeys({ start: key(...prefix), end: key(...prefix, END) })) {
    const id = idOf(other);
    if (id === doc.id) continue;
    const record = env.records.get(key(collection, id));
    if (record && dataEqual(tuple(def, record), values)) throw new StoreDuplicateError(collection, def.fields);
  }
}

/** Whether `a` and `b` hold the same primitive value (or none) in every field of `def`: then their entries are one. */
function samePrimitives(def: IndexDef, a: Doc, b: Doc): boolean {
  for (const field of def.fields) {
    const value = valueAt(a, field);
    if (value !== valueAt(b, field) || (typeof value === 'object' && value !== null)) return false;
  }
  return true;
}

/**
 * Replaces the index entries of `before` by those of `after` (null for an insert or a delete), checking
 * unique indexes first; a throw aborts the surrounding transaction.
 */
export function writeEntries(
  env: RecordsEnv,
  collection: string,
  defs: IndexDef[],
  before: Doc | null,
  after: Doc | null,
): void {
  for (const def of defs) {
    // Most rewrites leave the indexed fields alone: no keys to build, encode and compare then.
    if (before && after && samePrimitives(def, before, after)) continue;
    if (def.unique && after && (!before || !dataEqual(tuple(def, before), tuple(def, after)))) {
      assertUnique(env, collection, def, after);
    }
    const oldKey = before && entryKey(collection, def, before);
    const newKey = after && entryKey(collection, def, after);
    if (oldKey && newKey && compareKeys(oldKey, newKey) === 0) continue;
    if (oldKey) env.indexes.removeSync(oldKey);
    if (newKey) env.indexes.putSync(newKey, true);
  }
}

/**
 * Makes the built indexes of `collection` match `defs`: back-fills new ones from the records and drops
 * those no longer declared. Processes sharing a data directory are expected to declare the same indexes.
 */
export function ensureIndexes(env: RecordsEnv, collection: string, defs: IndexDef[]): void {
  const wanted = defs.map((def) => def.name);
  const current = (built: string[] | undefined) =>
    built !== undefined && built.length === wanted.length && wanted.every((name) => built.includes(name));
  if (current(env.catalog.get(collection))) return;
  env.root.transactionSync(() => {
    // Read again under the write lock: another process may have built them meanwhile.
    const built = env.catalog.get(collection) ?? [];
    if (current(built)) return;
    for (const name of built) {
      if (wanted.includes(name)) continue;
      const stale = [...env.indexes.getKeys({ start: key(collection, name), end: key(collection, name, END) })];
      for (const k of stale) env.indexes.removeSync(k);
    }
    for (const def of defs) {
      if (built.includes(def.name)) continue;
      for (const { value: doc } of env.records.getRange({ start: key(collection), end: key(collection, END) })) {
        writeEntries(env, collection, [def], null, doc);
      }
    }
    env.catalog.putSync(collection, wanted);
  });
}
