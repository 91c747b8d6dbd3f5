/**
 * Reading query strings by hand: repeated keys arrive as arrays, every value as a string, and each
 * problem is a 400 naming the parameter (never a 500, whatever the client sends).
 */
import { characters } from '../../../platform/characters.js';
import { CONVERSATIONS } from '../../../platform/errors.js';

export type RawQuery = Record<string, string | string[] | undefined>;

/** The parameter's single value; sending it twice is a 400. */
export function single(q: RawQuery, name: string): string | undefined {
  const v = q[name];
  if (Array.isArray(v)) {
    if (v.length > 1) throw CONVERSATIONS.PARAM_REPEATED(name);
    return v[0];
  }
  return v;
}

/** Every value of a repeatable parameter (also accepting comma-separated lists). */
export function many(q: RawQuery, name: string): string[] {
  const v = q[name];
  const values = v === undefined ? [] : Array.isArray(v) ? v : [v];
  return values.flatMap((x) => x.split(',')).map((x) => x.trim()).filter((x) => x.length > 0);
}

export function bool(q: RawQuery, name: string): boolean | undefined {
  const v = single(q, name);
  if (v === undefined || v === '') return undefined;
  const lower = v.toLowerCase();
  if (lower === 'true' || lower === '1') return true;
  if (lower === 'false' || lower === '0') return false;
  throw CONVERSATIONS.PARAM_NOT_BOOLEAN(name);
}

export function integer(q: RawQuery, name: string, min: number, max: number): number | undefined {
  const v = single(q, name);
  if (v === undefined || v === '') return undefined;
  if (!/^\d{1,16}$/.test(v.trim())) throw CONVERSATIONS.PARAM_NOT_INTEGER(name, min, max);
  const n = Number(v.trim());
  if (n < min || n > max) throw CONVERSATIONS.PARAM_NOT_INTEGER(name, min, max);
  return n;
}

export function oneOf<T extends string>(q: RawQuery, name: string, values: readonly T[]): T | undefined {
  const v = single(q, name);
  if (v === undefined || v === '') return undefined;
  if (!(values as readonly string[]).includes(v)) throw CONVERSATIONS.PARAM_NOT_ONE_OF(name, values.join(', '));
  return v as T;
}

/** A string parameter of at most `max` characters (empty counts as absent). */
export function text(q: RawQuery, name: string, max = 256): string | undefined {
  const v = single(q, name);
  if (v === undefined || v === '') return undefined;
  if (v.length > max && characters(v) > max) throw CONVERSATIONS.PARAM_TOO_LONG(name, max);
  return v;
}

const ISO = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;

/**
 * An ISO 8601 date-time (or date), as milliseconds since the epoch. Without a zone it is UTC. Years are
 * four digits, so that the ISO strings the store compares stay in one format.
 */
export function time(q: RawQuery, name: string): number | undefined {
  const v = single(q, name);
  if (v === undefined || v === '') return undefined;
  const s = v.trim();
  if (!ISO.test(s)) throw CONVERSATIONS.PARAM_NOT_DATE_TIME(name);
  let normalized = s.replace(' ', 'T');
  if (normalized.length === 10) normalized += 'T00:00:00Z';
  else if (!/(?:Z|[+-]\d{2}:?\d{2})$/i.test(normalized)) normalized += 'Z';
  normalized = normalized.replace(/([+-]\d{2})(\d{2})$/, '$1:$2');
  const ms = Date.parse(normalized);
  if (!Number.isFinite(ms) || ms < 0 || ms >= Date.UTC(10000, 0, 1)) throw CONVERSATIONS.PARAM_NOT_DATE_TIME(name);
  // Date.parse rolls over impossible dates (2026-02-31); the calendar date must survive a round trip.
  const [y, m, d] = s.slice(0, 10).split('-').map(Number);
  const day = new Date(Date.UTC(y, m - 1, d));
  if (day.getUTCFullYear() !== y || day.getUTCMonth() !== m - 1 || day.getUTCDate() !== d) {
    throw CONVERSATIONS.PARAM_NOT_CALENDAR_DATE(name);
  }
  return ms;
}
