/**
 * How the sub-databases that hold objects (records, snapshots, journal entries) encode them: msgpackr
 * records whose shapes (their keys, in order) are shared, kept in the sub-database itself (lmdb-js's
 * `sharedStructuresKey`). A stored object then names its shape by a one- or two-byte id; without them every
 * value carried its shapes' definitions inline, which encoding wrote and decoding parsed into a new reader on
 * every read (bench/README.md, seventh session). The first `maxSharedStructures` shapes are shared; any later
 * one is defined inline in each value. A write transaction that rolls back after saving a new shape leaves
 * the encoder ahead of the file: the group commit then makes the encoders reload their shapes
 * (`forgetShapes` in `env.ts`).
 *
 * Only objects whose keys are field names are records (`hasFieldNames`). An object whose keys are data (a
 * map from connection ids, a project's topics by id, a tenant's own keys) is written as a plain msgpack map
 * and read back as an object (`mapsAsObjects`): as a record, every distinct set of its keys would be a shape
 * of its own. A webchat session's connections keyed by id took the 512 shared slots after 512 connections,
 * each new one saving the whole list of shapes in its commit, and every shape of the platform's own first
 * written after that (a handoff, a new field after an upgrade) was defined inline in each value for as long
 * as the data directory lived (bench/README.md, seventeenth session).
 */

/**
 * Whether `key` reads as a field name: letters, `_` or `$`, then at most three digits (`p99`), at most 40
 * characters. Ids (`ses_0Vcd…`, UUIDs, `w-vm-…`), numbers and paths do not.
 */
export function isFieldName(key: string): boolean {
  const n = key.length;
  if (n === 0 || n > 40) return false;
  let i = 0;
  for (; i < n; i++) {
    const c = key.charCodeAt(i);
    if (!((c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c === 36)) break;
  }
  if (i === 0 || n - i > 3) return false;
  for (; i < n; i++) {
    const c = key.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/** Whether msgpackr encodes `object` as a record: its first key is a field name (an empty object is one too). */
export function hasFieldNames(object: object): boolean {
  for (const key in object) return isFieldName(key);
  return true;
}

/** The encoder options of the sub-databases that hold objects. */
export const SHARED_SHAPES = {
  sharedStructuresKey: Symbol.for('structures'),
  maxSharedStructures: 512,
  useRecords: hasFieldNames,
  mapsAsObjects: true,
} as const;
