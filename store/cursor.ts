/**
 * Keyset pagination shared by every backend. A page is an ordinary `find` whose filter adds a keyset
 * condition ("sorts after the last row of the previous page") expressed as a MongoDB `$or` filter, so
 * mingo and MongoDB evaluate it identically and neither backend needs cursor-specific code.
 *
 * The keyset condition follows MongoDB's cross-type sort order for the scalars that sort fields are
 * expected to hold: null/missing < numbers < strings < booleans. Comparison operators such as `$gt` only
 * compare values of the same type, so the condition adds `$type` clauses for the types that sort after
 * (or before) the last value. A row whose sort field holds an object, an array or a non-finite number
 * cannot be placed in that order; `page` refuses it rather than skip rows silently.
 */
import { StoreCursorError } from './errors.js';
import type { Doc, Filter, FindOptions, Page, PageOptions, Sort } from './types.js';

type SortValue = string | number | boolean | null;

/** `$type` aliases of the non-null scalar types in MongoDB sort order (understood by mingo too). */
const TYPE_ORDER = ['number', 'string', 'bool'] as const;

/** The order a backend sorts by: `sort` with `id` ascending appended as the tie-breaker, unless `sort` names `id`. */
export function sortWithId(sort: Sort = {}): Sort {
  return 'id' in sort ? sort : Object.assign({}, sort, { id: 1 });
}

/**
 * The value at a dotted path of a document: undefined when a step is missing, and the array itself when
 * the path runs into one (MongoDB would then look into every element, which only array-aware callers
 * can do: they see a non-scalar and act accordingly).
 */
export function valueAt(doc: unknown, path: string): unknown {
  // One field, as most paths are: no array from `split` on every call (indexes read their fields on every write).
  if (!path.includes('.')) {
    if (Array.isArray(doc)) return doc;
    return doc === null || typeof doc !== 'object' ? undefined : (doc as Record<string, unknown>)[path];
  }
  let value = doc;
  for (const step of path.split('.')) {
    if (Array.isArray(value)) return value;
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[step];
  }
  return value;
}

/**
 * One page of `filter` in `options.sort` order (ties broken by id), read with `find`, which must sort by
 * `sortWithId(sort)` and apply `limit`. Throws `StoreCursorError` for a cursor that does not decode or
 * was issued for another sort, and `RangeError` for a limit below 1.
 */
export async function page<T extends Doc>(
  find: (filter: Filter, options: FindOptions) => Promise<T[]>,
  filter: Filter,
  options: PageOptions,
): Promise<Page<T>> {
  const { limit } = options;
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`page limit must be an integer >= 1, got ${limit}`);
  const sort = options.sort ?? {};
  let where = filter;
  if (options.cursor !== undefined) {
    const after = keysetAfter(Object.entries(sortWithId(sort)), decodeCursor(options.cursor, sort));
    where = Object.keys(filter).length === 0 ? after : { $and: [filter, after] };
  }
  // One row more than asked tells whether another page follows without a second query.
  const rows = await find(where, { sort, limit: limit + 1 });
  if (rows.length <= limit) return { items: rows, next: null };
  const items = rows.slice(0, limit);
  return { items, next: encodeCursor(sort, items[items.length - 1]) };
}

function signature(sort: Sort): string {
  return Object.entries(sort)
    .map(([field, dir]) => `${dir === -1 ? '-' : '+'}${field}`)
    .join(',');
}

function encodeCursor(sort: Sort, last: Doc): string {
  const values = Object.keys(sort).map((field) => sortValue(last, field));
  return Buffer.from(JSON.stringify([signature(sort), ...values, last.id])).toString('base64url');
}

/** The last row's values for every field of `sortWithId(sort)`, in order. */
function decodeCursor(cursor: string, sort: Sort): SortValue[] {
  let decoded: unknown;
  try {
    const json = Buffer.from(cursor, 'base64url').toString('utf8');
    // Node's base64url decoder skips characters it does not know; re-encoding catches such cursors.
    if (Buffer.from(json).toString('base64url') !== cursor) throw new StoreCursorError();
    decoded = JSON.parse(json);
  } catch {
    throw new StoreCursorError();
  }
  const fields = Object.keys(sort);
  if (
    !Array.isArray(decoded) ||
    decoded.length !== fields.length + 2 ||
    typeof decoded[decoded.length - 1] !== 'string' ||
    !decoded.slice(1).every(isSortValue)
  ) {
    throw new StoreCursorError();
  }
  if (decoded[0] !== signature(sort)) throw new StoreCursorError('cursor was issued for another sort');
  const values = decoded.slice(1, -1) as SortValue[];
  return 'id' in sort ? values : [...values, decoded[decoded.length - 1] as string];
}

function isSortValue(value: unknown): value is SortValue {
  return (
    value === null ||
    typeof value === 'string' ||
    typeof value === 'boolean' ||
    (typeof value === 'number' && Number.isFinite(value))
  );
}

function sortValue(doc: Doc, path: string): SortValue {
  const value = valueAt(doc, path) ?? null;
  if (!isSortValue(value)) {
    throw new TypeError(`page(): sort field '${path}' of record ${doc.id} holds a value that cannot be paged by`);
  }
  return value;
}

/** Rows strictly after the row whose sort values are `values`: (f1 > v1) or (f1 = v1 and f2 > v2) or ... */
function keysetAfter(order: Array<[string, 1 | -1]>, values: SortValue[]): Filter {
  const branches: Filter[] = [];
  order.forEach(([field, dir], i) => {
    const later = laterThan(values[i], dir);
    if (later.length === 0) return;
    const ties = order.slice(0, i).map(([f], j) => ({ [f]: { $eq: values[j] } }));
    const after = later.length === 1 ? { [field]: later[0] } : { $or: later.map((cond) => ({ [field]: cond })) };
    branches.push(ties.length === 0 ? after : { $and: [...ties, after] });
  });
  // `id` always takes part in the order and a string always has successors, so `branches` is never empty.
  return branches.length === 1 ? branches[0] : { $or: branches };
}

/** Field conditions matching the values that come after `value` in direction `dir`. */
function laterThan(value: SortValue, dir: 1 | -1): Filter[] {
  const descending = dir === -1;
  if (value === null) return descending ? [] : [{ $ne: null }];
  const rank = TYPE_ORDER.indexOf(typeof value === 'number' ? 'number' : typeof value === 'string' ? 'string' : 'bool');
  const conditions: Filter[] = [descending ? { $lt: value } : { $gt: value }];
  const otherTypes = descending ? TYPE_ORDER.slice(0, rank) : TYPE_ORDER.slice(rank + 1);
  if (otherTypes.length > 0) conditions.push({ $type: otherTypes });
  if (descending) conditions.push({ $eq: null });
  return conditions;
}
