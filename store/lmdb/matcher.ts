/**
 * Compiles a filter document into a predicate with MongoDB's semantics (mingo's). Compiling is per query,
 * so its cost counts: mingo's `new Query` from the package root copies its whole operator table (hundreds
 * of expression operators) on every call. Filters that need no expression operators compile
 * against a context holding only the query operators, and the commonest filter, equality
 * of top-level fields to strings or booleans, needs no compiling at all.
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
  const equalities = plainEqualities(filter);
  if (equalities) return (doc) => equalities.every(([field, value]) => equals(doc[field], value));
  const query = usesExpressions(filter) ? new Query(filter) : new BareQuery(filter, { context: QUERY_ONLY });
  return (doc) => query.test(doc);
}

/**
 * `[field, value]` pairs when every condition is a top-level, undotted field equal to a string, a boolean or a
 * finite number, else undefined. Such a condition matches the value itself or an array holding it, as in
 * MongoDB (a number only a number: `1` never matches `'1'`; `0` matches `-0`; NaN, which MongoDB matches to
 * NaN, is left to mingo).
 */
function plainEqualities(filter: Filter): Array<[string, Scalar]> | undefined {
  const out: Array<[string, Scalar]> = [];
  for (const field in filter) {
    if (!Object.prototype.hasOwnProperty.call(filter, field)) continue;
    const value = filter[field];
    if (field === '' || field.startsWith('$') || field.includes('.') || field in Object.prototype) return undefined;
    if (typeof value !== 'string' && typeof value !== 'boolean' && !(typeof value === 'number' && Number.isFinite(value))) return undefined;
    out.push([field, value]);
  }
  return out;
}

type Scalar = string | boolean | number;

function equals(actual: unknown, expected: Scalar): boolean {
  if (actual === expected) return true;
  return Array.isArray(actual) && actual.includes(expected);
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
