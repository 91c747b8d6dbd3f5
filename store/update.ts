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
