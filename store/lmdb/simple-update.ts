/**
 * The common update documents applied without mingo: only `$set`, `$unset` and `$inc`, on field paths of
 * named segments through plain objects (a numeric segment names a field of an object, as `partitions.3` does). Projection checkpoints and metric buckets are written
 * this way several times per runner cycle, and mingo's `update` rebuilds its operator tables on every call.
 * Anything else (other operators, an array on the path, a path through a non-object, `$inc` of a non-number)
 * returns `null` untouched, and the caller applies the update with mingo as before. The result equals
 * mingo's (test/store.simple-update.test.ts holds them equal with fast-check).
 */
import { dataEqual } from './equal.js';

const SIMPLE = new Set(['$set', '$unset', '$inc']);

const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;

/**
 * Whether the path `path` lies inside the path `prefix` (`a.b` inside `a`), compared in place: a checkpoint's
 * update names a field per partition, and every pair of them is compared.
 */
function isInside(path: string, prefix: string): boolean {
  return path.length > prefix.length && path.charCodeAt(prefix.length) === 46 /* . */ && path.startsWith(prefix);
}

/** A path of named segments, or null when mingo must handle it. */
function pathOf(field: string): string[] | null {
  const segments = field.split('.');
  for (const s of segments) if (s === '' || s.startsWith('$')) return null;
  return segments;
}

/** The object holding the last segment; `create` makes missing ones. Null when a segment is not an object. */
function parentOf(doc: Record<string, unknown>, path: string[], create: boolean): Record<string, unknown> | null | undefined {
  let at: Record<string, unknown> = doc;
  for (let i = 0; i < path.length - 1; i++) {
    const next = at[path[i]];
    if (next === undefined) {
      if (!create) return undefined;
      const made: Record<string, unknown> = {};
      at[path[i]] = made;
      at = made;
    } else if (isPlain(next)) at = next;
    else return null;
  }
  return at;
}

/** Reads a path without creating anything: `undefined` when absent, `null` marker via `blocked`. */
function peek(doc: Record<string, unknown>, path: string[]): { blocked: boolean; value: unknown } {
  let at: unknown = doc;
  for (let i = 0; i < path.length - 1; i++) {
    const next = (at as Record<string, unknown>)[path[i]];
    if (next === undefined) return { blocked: false, value: undefined };
    if (!isPlain(next)) return { blocked: true, value: undefined };
    at = next;
  }
  return { blocked: false, value: (at as Record<string, unknown>)[path[path.length - 1]] };
}

/**
 * Applies `update` to `doc` in place when it is simple; returns the changed fields, or null (doc untouched)
 * when mingo must apply it.
 */
export function applySimpleUpdate(doc: Record<string, unknown>, update: Record<string, unknown>): string[] | null {
  const ops: Array<{ op: string; field: string; path: string[]; value: unknown }> = [];
  const seen: string[] = [];
  for (const [op, fields] of Object.entries(update)) {
    if (!SIMPLE.has(op) || !isPlain(fields)) return null;
    for (const [field, value] of Object.entries(fields)) {
      const path = pathOf(field);
      if (!path) return null;
      // Two operators on one path, or on a path and its prefix, conflict in MongoDB: leave that to mingo.
      if (seen.some((f) => f === field || isInside(f, field) || isInside(field, f))) return null;
      seen.push(field);
      const { blocked, value: current } = peek(doc, path);
      if (blocked) return null;
      if (op === '$inc' && (typeof value !== 'number' || (current !== undefined && typeof current !== 'number'))) return null;
      if (op === '$set' && value === undefined) return null;
      ops.push({ op, field, path, value });
    }
  }
  const changed: string[] = [];
  for (const { op, field, path, value } of ops) {
    const last = path[path.length - 1];
    if (op === '$unset') {
      const parent = parentOf(doc, path, false);
      if (parent && last in parent) {
        delete parent[last];
        changed.push(field);
      }
      continue;
    }
    const parent = parentOf(doc, path, true)!;
    if (op === '$inc') {
      const current = parent[last] as number | undefined;
      if (current === undefined || value !== 0) {
        parent[last] = (current ?? 0) + (value as number);
        changed.push(field);
      }
      continue;
    }
    if (!dataEqual(parent[last], value)) {
      // Primitives as they are (a checkpoint sets a number per partition); objects copied, as mingo does.
      parent[last] = typeof value === 'object' && value !== null ? structuredClone(value) : value;
      changed.push(field);
    }
  }
  return changed;
}
