/**
 * Picks the key ranges a query reads. A plan only narrows: whatever it yields is rechecked against the
 * full filter with mingo, so a plan must yield a superset of the matching records, never miss one.
 *
 * Usable conditions are the top-level ones (and those inside a top-level `$and`): equality or `$in` of
 * scalars on a prefix of an index's fields, optionally followed by a `$gt/$gte/$lt/$lte` range on the
 * next field. Equality or `$in` on `id` reads the records directly; anything else scans the collection.
 *
 * The conditions on the index's later fields (past that prefix, the range's field included) are checked on
 * the values in each entry's key before its record is read (`KeyCheck`): an index on (project, ended_at,
 * started_at) read for "ended after t" reads the keys of the conversations that ended since t, but only the
 * records of those that also started in the range asked. Between plans that use as many conditions for their
 * ranges, one that checks more in its keys wins.
 */
import type { Key } from 'lmdb';
import type { Filter } from '../types.js';
import type { IndexDef } from './indexes.js';
import { END, SPILL, boundValue, isKeyString, key, keyValue, type KeyValue } from './keys.js';

export type Plan =
  /** Primary-key lookups. */
  | { kind: 'ids'; ids: string[] }
  /** A range of the records sub-database (the whole collection when unbounded). */
  | { kind: 'records'; start: Key; end: Key }
  /** Ranges of an index; the ids found there whose keys pass `checks` are looked up in the records. */
  | {
      kind: 'index';
      index: string;
      ranges: Array<{ start: Key; end: Key }>;
      checks: KeyCheck[];
      /** The index's fields, and how many of the first are fixed by equality (`$in` of one value included). */
      fields: string[];
      prefix: number;
    };

/**
 * A condition of the filter on one field of an index, checked on the field's value in an entry's key (at
 * position `at`): an entry whose value is the field's own (`isWholeKeyValue`) and fails `filter` is a record
 * the filter cannot match (its top-level conditions all must hold). Entries whose value was cut or stands
 * for a missing field, and SPILL entries, are read.
 */
export interface KeyCheck {
  at: number;
  field: string;
  /** The field's conditions alone (`{field: condition}`, or an `$and` of them), for `matcher`. */
  filter: Filter;
}

/** What the filter says about one field: the values it must equal (any of) and its range bounds. */
interface Terms {
  points?: unknown[];
  lower?: unknown;
  upper?: unknown;
}

/** Beyond this many equality combinations (`$in` on several fields), a shorter index prefix is used. */
const MAX_POINTS = 256;

/** Where a range of each type starts and ends in key order when the filter gives only one bound. */
const TYPE_MIN: Record<string, KeyValue> = { number: -Infinity, string: '', boolean: false };
const TYPE_MAX: Record<string, KeyValue | typeof END> = { number: Infinity, string: END, boolean: true };

/** The cheapest plan for `filter`: id lookups, else the index using most conditions, else a scan. */
export function plan(collection: string, filter: Filter, indexes: IndexDef[]): Plan {
  const terms = new Map<string, Terms>();
  collect(filter, terms);

  const id = terms.get('id');
  // Ids are strings; a non-string can match no record, and an id that is no valid key was never stored.
  if (id?.points?.every(isPrimitive)) return { kind: 'ids', ids: [...new Set(id.points.filter(isKeyString))] };

  let best: Plan = { kind: 'records', start: key(collection), end: key(collection, END) };
  let bestScore = 0;
  const idRange = id && stringRange(id);
  if (idRange) {
    const [from, to] = idRange;
    best = {
      kind: 'records',
      start: key(collection, from),
      end: to === END ? key(collection, END) : key(collection, to, END),
    };
    bestScore = 1;
  }
  for (const index of indexes) {
    const candidate = indexPlan(collection, index, terms, filter);
    if (candidate && candidate.score > bestScore) [best, bestScore] = [candidate.plan, candidate.score];
  }
  return best;
}

function indexPlan(
  collection: string,
  index: IndexDef,
  terms: Map<string, Terms>,
  filter: Filter,
): { plan: Plan; score: number } | undefined {
  let prefixes: KeyValue[][] = [[]];
  let used = 0;
  for (const field of index.fields) {
    const points = keyPoints(terms.get(field));
    if (!points || prefixes.length * points.length > MAX_POINTS) break;
    prefixes = prefixes.flatMap((prefix) => points.map((point) => [...prefix, point]));
    used++;
  }
  const range = used < index.fields.length ? keyRange(terms.get(index.fields[used])) : undefined;
  let score = used * 2 + (range ? 1 : 0);
  if (score === 0) return undefined;
  const checks: KeyCheck[] = [];
  // The range's own field is bounded by the range (what an inclusive bound lets through, the record's match drops).
  for (let i = range ? used + 1 : used; i < index.fields.length; i++) {
    const conditions = conditionsOn(filter, index.fields[i]);
    if (conditions.length === 0) continue;
    // The key's fields follow the collection and the index name.
    checks.push({ at: 2 + i, field: index.fields[i], filter: conditions.length === 1 ? conditions[0] : { $and: conditions } });
  }
  // A half: it breaks a tie between plans whose ranges use as many conditions, never outranks one that uses more.
  if (checks.length > 0) score += 0.5;
  const ranges = prefixes.map((prefix) =>
    range
      ? {
          start: key(collection, index.name, ...prefix, range.from),
          end:
            range.to === END
              ? key(collection, index.name, ...prefix, END)
              : key(collection, index.name, ...prefix, range.to, END),
        }
      : { start: key(collection, index.name, ...prefix), end: key(collection, index.name, ...prefix, END) },
  );
  // Records whose indexed values have no key form may match anything: always read them too.
  ranges.push({ start: key(collection, index.name, SPILL), end: key(collection, index.name, SPILL, END) });
  return { plan: { kind: 'index', index: index.name, ranges, checks, fields: index.fields, prefix: used }, score };
}

/**
 * The conditions of `filter` on an undotted `field` that must hold for a record to match: its own, and those
 * of the clauses of a top-level `$and`, each as `{field: condition}`. A dotted field is not checked (its
 * value in a key may come from an embedded document that the condition reads otherwise).
 */
function conditionsOn(filter: Filter, field: string): Filter[] {
  if (field.includes('.') || field.startsWith('$')) return [];
  const out: Filter[] = [];
  const add = (where: Filter) => {
    if (Object.prototype.hasOwnProperty.call(where, field)) out.push({ [field]: where[field] });
  };
  add(filter);
  if (Array.isArray(filter.$and)) for (const clause of filter.$and) if (isPlainObject(clause)) add(clause);
  return out;
}

function collect(filter: Filter, terms: Map<string, Terms>): void {
  for (const [field, condition] of Object.entries(filter)) {
    if (field === '$and' && Array.isArray(condition)) {
      for (const clause of condition) if (isPlainObject(clause)) collect(clause, terms);
      continue;
    }
    if (field.startsWith('$')) continue;
    let fieldTerms = terms.get(field);
    if (!fieldTerms) terms.set(field, (fieldTerms = {}));
    if (!isOperatorObject(condition)) {
      fieldTerms.points ??= [condition];
      continue;
    }
    // Several terms on one field are a conjunction, so any one of each kind is a valid restriction.
    for (const [op, argument] of Object.entries(condition)) {
      if (op === '$eq') fieldTerms.points ??= [argument];
      else if (op === '$in' && Array.isArray(argument)) fieldTerms.points ??= argument;
      else if (op === '$gt' || op === '$gte') fieldTerms.lower ??= argument;
      else if (op === '$lt' || op === '$lte') fieldTerms.upper ??= argument;
    }
  }
}

/** Key forms of the equality values, or undefined when one of them has none (a regex, an object, ...). */
function keyPoints(terms: Terms | undefined): KeyValue[] | undefined {
  if (!terms?.points) return undefined;
  const points: KeyValue[] = [];
  for (const point of terms.points) {
    const value = isPrimitive(point) ? keyValue(point) : undefined;
    if (value === undefined) return undefined;
    points.push(value);
  }
  return points;
}

/**
 * The inclusive key range holding every scalar that satisfies the bounds. Comparisons only match values of
 * the bound's type, so a one-sided range stops at the end of that type. Bounds of two different types
 * cannot both hold for a scalar; the lower one alone still gives a superset.
 */
function keyRange(terms: Terms | undefined): { from: KeyValue; to: KeyValue | typeof END } | undefined {
  if (!terms) return undefined;
  let lower = terms.lower === undefined ? undefined : boundValue(terms.lower);
  let upper = terms.upper === undefined ? undefined : boundValue(terms.upper);
  if (lower !== undefined && upper !== undefined && typeof lower !== typeof upper) upper = undefined;
  const type = typeof (lower ?? upper);
  if (lower === undefined && upper === undefined) return undefined;
  lower ??= TYPE_MIN[type];
  return { from: lower, to: upper ?? TYPE_MAX[type] };
}

/** The inclusive id range given by string bounds on `id` (ids are never truncated, so bounds must be valid ids). */
function stringRange(terms: Terms): [string, string | typeof END] | undefined {
  const usable = (bound: unknown) => isKeyString(bound) && boundValue(bound) === bound;
  const lower = usable(terms.lower) ? (terms.lower as string) : undefined;
  const upper = usable(terms.upper) ? (terms.upper as string) : undefined;
  if (lower === undefined && upper === undefined) return undefined;
  return [lower ?? '', upper ?? END];
}

function isPrimitive(value: unknown): boolean {
  return value === null || value === undefined || ['string', 'number', 'boolean'].includes(typeof value);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}

export function isOperatorObject(value: unknown): value is Record<string, unknown> {
  if (!isPlainObject(value)) return false;
  const keys = Object.keys(value);
  return keys.length > 0 && keys.every((k) => k.startsWith('$'));
}
