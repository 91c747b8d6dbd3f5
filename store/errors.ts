/** Errors a store backend throws. Callers map them to their interface family's error shape. */

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
