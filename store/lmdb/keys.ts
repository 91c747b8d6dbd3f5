/**
 * LMDB key layout. lmdb-js encodes array keys with `ordered-binary`, which orders them element by element:
 * null < symbols < false < true < numbers < strings (UTF-8 byte order), and a Buffer of 0xff sorts after
 * all of them. Keys of the sub-databases:
 *
 * - records:   [collection, id]
 * - indexes:   [collection, indexName, ...fieldValues, id], or [collection, indexName, SPILL, id] for a
 *              record whose indexed fields cannot all be placed in key order (see `keyValue`)
 * - catalog:   collection -> names of the indexes built for it
 * - snapshots: key
 * - deadlines: [shard, deadline, key]
 * - journal: seq -> entry
 * - journal-heads: key -> the ends of its chain of entries, for a key without a snapshot
 * - meta: name -> number (`journal.seq`: the last journal seq assigned)
 */
import type { Key } from 'lmdb';

/** Sorts after every element ordered-binary produces for primitives: `[...prefix, END]` ends a prefix range. */
export const END = Buffer.from([0xff]);

/** Marks index entries of records whose indexed values have no place in key order. Sorts below false. */
export const SPILL = Symbol.for('switchboard.store.spill');

/** A field value as it appears in an index key. */
export type KeyValue = string | number | boolean | null;

/**
 * Indexed strings are cut to this many code points so that keys stay under LMDB's 1978-byte limit.
 * Cutting by code points keeps the order of the UTF-8 encodings monotonic (a < b implies cut(a) <= cut(b)),
 * which is why every range bound on an index is read inclusively and rechecked.
 */
const MAX_KEY_CODE_POINTS = 100;

/** Lone surrogates have no UTF-8 encoding, so their key order would be arbitrary. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * JavaScript compares strings by UTF-16 code units (mingo does) while keys order by code points; the two
 * agree for any comparison against a string without code units at or above 0xD800, so only such
 * strings may bound an index range.
 */
const ABOVE_SURROGATES = /[\uD800-\uFFFF]/;

/** Builds a key. lmdb-js accepts null elements, which its `Key` type does not spell out. */
export function key(...parts: Array<KeyValue | symbol | Buffer>): Key {
  return parts as Key;
}

/**
 * The key form of a field value, or undefined when it has none. Missing and undefined are indexed as null,
 * as MongoDB does (`{f: null}` matches them). Objects, arrays, NaN and strings with NUL (which lmdb-js
 * documents as unsupported in keys) or lone surrogates return undefined: the record is then indexed
 * under SPILL and every plan on that index reads the SPILL entries too, so results stay exact (an array
 * may match an equality or a range through any of its elements) while the common scalar case is narrowed.
 */
export function keyValue(value: unknown): KeyValue | undefined {
  switch (typeof value) {
    case 'undefined':
      return null;
    case 'boolean':
      return value;
    case 'number':
      // -0 has its own ordered-binary encoding but equals 0 in every query.
      return Number.isNaN(value) ? undefined : value === 0 ? 0 : value;
    case 'string':
      return value.includes('\0') || LONE_SURROGATE.test(value) ? undefined : truncate(value);
    default:
      return value === null ? null : undefined;
  }
}

/** The key form of a range bound (`$gt` etc.), or undefined when the value cannot bound an index scan. */
export function boundValue(value: unknown): KeyValue | undefined {
  if (typeof value === 'string' && ABOVE_SURROGATES.test(value)) return undefined;
  if (value === null || value === undefined) return undefined;
  return keyValue(value);
}

/**
 * Whether a value read from an index key is the indexed field's value itself: a number, a boolean, or a
 * string shorter than the cut (a cut string keeps `MAX_KEY_CODE_POINTS` code points, so at least that many
 * UTF-16 units). null is not: it stands for a missing, undefined or null field alike.
 */
export function isWholeKeyValue(value: unknown): value is string | number | boolean {
  return typeof value === 'number' || typeof value === 'boolean' || (typeof value === 'string' && value.length < MAX_KEY_CODE_POINTS);
}

function truncate(value: string): string {
  if (value.length <= MAX_KEY_CODE_POINTS) return value;
  let end = 0;
  let count = 0;
  for (const char of value) {
    if (count++ === MAX_KEY_CODE_POINTS) break;
    end += char.length;
  }
  return value.slice(0, end);
}

/** The id in a record or index key (always its last element). */
export function idOf(k: Key): string {
  return (k as unknown[])[(k as unknown[]).length - 1] as string;
}

/** Ids and collection names are capped so that every key holding them stays under LMDB's key size limit. */
const MAX_NAME_BYTES = 512;

/** Whether a string can be an id or collection name: non-empty, no NUL, well-formed and not too long. */
export function isKeyString(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    value.length > 0 &&
    !value.includes('\0') &&
    !LONE_SURROGATE.test(value) &&
    Buffer.byteLength(value) <= MAX_NAME_BYTES
  );
}
