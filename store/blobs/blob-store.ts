/**
 * Blobs: large binary values (call recordings) kept beside the record store, written in numbered chunks so
 * a writer that dies loses only the chunk it had not finished. Names are `/`-separated paths of safe
 * segments (`[A-Za-z0-9._-]`); a prefix names a folder of them.
 */
export interface BlobStore {
  /** Which backend: 'fs' (under DATA_DIR) or 'gridfs' (the MongoDB deployment). */
  readonly backend: 'fs' | 'gridfs';
  /** Writes chunk `index` of `name` durably (flushed to disk before it resolves); rewriting an index replaces it. */
  putChunk(name: string, index: number, data: Buffer): Promise<void>;
  /** The chunks of `name` in index order, concatenated; null when it has none. */
  read(name: string): Promise<Buffer | null>;
  /** Writes a whole blob (one chunk, index 0), replacing what was there. */
  put(name: string, data: Buffer): Promise<void>;
  /** The blob names under a prefix (each name once, whatever its chunk count). */
  list(prefix: string): Promise<string[]>;
  /** Deletes every blob under a prefix. */
  remove(prefix: string): Promise<void>;
  close(): Promise<void>;
}

const SEGMENT = /^[A-Za-z0-9._-]{1,128}$/;

/** Checks a blob name or prefix: safe segments only, no `.` or `..` (names come from ids, never from users unchecked). */
export function checkName(name: string): string[] {
  const parts = name.split('/');
  for (const p of parts) if (!SEGMENT.test(p) || p === '.' || p === '..') throw new Error(`bad blob name: ${name}`);
  return parts;
}
