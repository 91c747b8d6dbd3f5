/**
 * Compiles a filter document into a predicate with MongoDB's semantics (mingo's). Compiling is per query,
 * so its cost counts: mingo's `new Query` from the package root copies its whole operator table (hundreds
 * of expression operators) on every call. Filters that need no expression operators compile
 * against a context holding only the query operators, and the commonest filters, equality of top-level
 * fields to strings or booleans and `$in` lists of them (a page's rows or marks by id), need no compiling at
 * all: mingo's `$in` intersects arrays per document, so a query by 500 ids tested each of its 500 records
 * against all 500.
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
 * boolean or a finite number) or `{$in: [scalars]}`, else undefined. Such a condition matches the value itself
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
    if (!list) return undefined;
    out.push([field, (actual) => list.has(actual as Scalar) || (Array.isArray(actual) && actual.some((x) => list.has(x)))]);
  }
  return out;
}

type Scalar = string | boolean | number;

const isScalar = (v: unknown): v is Scalar => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));

/** The values of `{$in: [scalars]}` as a set (`Set` compares as `===` does, but for NaN, excluded), else undefined. */
function inList(condition: unknown): Set<Scalar> | undefined {
  if (typeof condition !== 'object' || condition === null || Array.isArray(condition)) return undefined;
  const proto = Object.getPrototypeOf(condition);
  if (proto !== Object.prototype && proto !== null) return undefined;
  const keys = Object.keys(condition);
  const values = (condition as { $in?: unknown }).$in;
  if (keys.length !== 1 || keys[0] !== '$in' || !Array.isArray(values) || !values.every(isScalar)) return undefined;
  return new Set(values);
}

function usesExpressions(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(usesExpressions);
  if (typeof value !== 'object' || value === null) return false;
  // Plain objects, with or without a prototype (a filter may come from a parser that makes either).
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const k of Object.keys(value)) if (EXPRESSIONS.has(k) || usesExpressions((value as Record<string, unknown>)[k])) return true;
  return false;
}
