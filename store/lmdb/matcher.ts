/**
 * Compiles a filter document into a predicate with MongoDB's semantics (mingo's). Compiling is per query,
 * so its cost counts: mingo's `new Query` from the package root copies its whole operator table (hundreds
 * of expression operators) on every call. Filters that need no expression operators compile
 * against a context holding only the query operators, and the commonest filters, equality of top-level
 * fields to strings or booleans, `$in` lists of them (a page's rows or marks by id) and ranges of strings or
 * numbers (a time window), need no compiling at all: mingo's `$in` intersects arrays per document, so a
 * query by 500 ids tested each of its 500 records against all 500, and its range operators cost a week's
 * 2,016 slots a few milliseconds a request.
 */
import { Query } from 'mingo';
import { Context } from 'mingo/core';
import * as queryOperators from 'mingo/operators/query';
import { Query as BareQuery } from 'mingo/query';
import type { Doc, Filter } from '../types.js';

const QUERY_ONLY = Context.init({ query: queryOperators });

/** Operators that evaluate aggregation expressions or scripts: they need mingo's full context. */
const EXPRESSIONS = new Set(['$expr', '$where', '$jsonSchema', '$function', '$accumulator']);

/** A predicate equivalent to `new Query(filter).test`. */
export function matcher(filter: Filter): (doc: Doc) => boolean {
  const conditions = plainConditions(filter);
  if (conditions) return (doc) => conditions.every(([field, test]) => test(doc[field]));
  const query = usesExpressions(filter) ? new Query(filter) : new BareQuery(filter, { context: QUERY_ONLY });
  return (doc) => query.test(doc);
}

/**
 * `[field, test]` pairs when every condition is a top-level, undotted field equal to a scalar (a string, a
 * boolean or a finite number), `{$in: [scalars]}` or a range of strings or numbers (`rangeOf`), else undefined. Such a condition matches the value itself
 * or an array holding it, as in MongoDB (a number only a number: `1` never matches `'1'`; `0` matches `-0`;
 * NaN, which MongoDB matches to NaN, and null, which matches a missing field, are left to mingo).
 */
function plainConditions(filter: Filter): Array<[string, (actual: unknown) => boolean]> | undefined {
  const out: Array<[string, (actual: unknown) => boolean]> = [];
  for (const field in filter) {
    if (!Object.prototype.hasOwnProperty.call(filter, field)) continue;
    const value = filter[field];
    if (field === '' || field.startsWith('$') || field.includes('.') || field in Object.prototype) return undefined;
    if (isScalar(value)) {
      out.push([field, (actual) => actual === value || (Array.isArray(actual) && actual.includes(value))]);
      continue;
    }
    const list = inList(value);
    if (list) {
      out.push([field, (actual) => list.has(actual as Scalar) || (Array.isArray(actual) && actual.some((x) => list.has(x)))]);
      continue;
    }
    const bounds = rangeOf(value);
    if (!bounds) return undefined;
    // An array matches when each bound is met by some element (not necessarily the same one), as in MongoDB.
    out.push([field, (actual) => bounds.every((within) => within(actual) || (Array.isArray(actual) && actual.some(within)))]);
  }
  return out;
}

/** The comparisons of a range condition, for one bound each. */
const COMPARE: Record<string, (a: string | number, b: string | number) => boolean> = {
  $gt: (a, b) => a > b,
  $gte: (a, b) => a >= b,
  $lt: (a, b) => a < b,
  $lte: (a, b) => a <= b,
};

/**
 * The bounds of `{$gt | $gte | $lt | $lte: string or finite number, ...}` as tests of one value, else
 * undefined. A bound matches only a value of its own type (a string bound no number, as MongoDB brackets
 * types): a time range over ISO strings (a page's window, a week's slots) is compared without mingo.
 */
function rangeOf(condition: unknown): Array<(actual: unknown) => boolean> | undefined {
  if (!isFilterObject(condition)) return undefined;
  const out: Array<(actual: unknown) => boolean> = [];
  for (const [op, bound] of Object.entries(condition)) {
    const compare = Object.prototype.hasOwnProperty.call(COMPARE, op) ? COMPARE[op] : undefined;
    if (!compare) return undefined;
    if (typeof bound === 'string') out.push((actual) => typeof actual === 'string' && compare(actual, bound));
    else if (typeof bound === 'number' && Number.isFinite(bound)) out.push((actual) => typeof actual === 'number' && compare(actual, bound));
    else return undefined;
  }
  return out.length > 0 ? out : undefined;
}

type Scalar = string | boolean | number;

const isScalar = (v: unknown): v is Scalar => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));

/** The values of `{$in: [scalars]}` as a set (`Set` compares as `===` does, but for NaN, excluded), else undefined. */
function inList(condition: unknown): Set<Scalar> | undefined {
  if (!isFilterObject(condition)) return undefined;
  const keys = Object.keys(condition);
  const values = condition.$in;
  if (keys.length !== 1 || keys[0] !== '$in' || !Array.isArray(values) || !values.every(isScalar)) return undefined;
  return new Set(values);
}

/** A plain object, with or without a prototype (a filter may come from a parser that makes either). */
function isFilterObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function usesExpressions(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(usesExpressions);
  if (!isFilterObject(value)) return false;
  for (const k of Object.keys(value)) if (EXPRESSIONS.has(k) || usesExpressions(value[k])) return true;
  return false;
}
