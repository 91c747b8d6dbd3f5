/** Errors a store backend throws. Callers map them to their interface family's error shape. */
import type { CollectionSpec } from './types.js';

/** An insert or update would duplicate a record id or a unique index value. */
export class StoreDuplicateError extends Error {
  readonly code = 'STORE_DUPLICATE';
  constructor(
    readonly collection: string,
    /** The fields of the violated unique index (`['id']` for the primary key). */
    readonly fields: string[],
  ) {
    super(`duplicate ${fields.join(', ')} in ${collection}`);
    this.name = 'StoreDuplicateError';
  }
}

/** A pagination cursor that this store did not issue, or that was issued for another sort. */
export class StoreCursorError extends Error {
  readonly code = 'STORE_CURSOR';
  constructor(message = 'malformed cursor') {
    super(message);
    this.name = 'StoreCursorError';
  }
}

/**
 * A collection declared again unlike its first declaration (other indexes, or the other way round as a read
 * model): a programming error, the same on every backend.
 */
export function redeclared(spec: CollectionSpec, differs: 'indexes' | 'readModel' | 'appended'): Error {
  const how =
    differs === 'indexes' ? 'with other indexes' : differs === 'appended' ? 'with another appended field' : spec.readModel ? 'as not a read model' : 'as a read model';
  return new Error(`collection ${spec.name} is already declared ${how}`);
}
