import type { Update } from './types.js';

/** Rules on update documents that both backends enforce alike. */

/** Whether an operator other than `$setOnInsert` writes `id` (ids never change; `$setOnInsert` may repeat the filter's). */
export function namesId(update: Update): boolean {
  return Object.entries(update).some(
    ([op, fields]) =>
      op !== '$setOnInsert' &&
      typeof fields === 'object' &&
      fields !== null &&
      Object.keys(fields).some((field) => field === 'id' || field.startsWith('id.')),
  );
}

/**
 * The version `putNewer` compares: `doc[field]`, which must be a finite number on a top-level field other
 * than `id`. Throws `TypeError` otherwise (both backends refuse the same calls).
 */
export function versionOf(doc: Record<string, unknown>, field: string): number {
  if (field === '' || field === 'id' || field.includes('.') || field.startsWith('$')) {
    throw new TypeError(`invalid version field ${JSON.stringify(field)}`);
  }
  const version = doc[field];
  if (typeof version !== 'number' || !Number.isFinite(version)) throw new TypeError(`${field} must be a finite number`);
  return version;
}
