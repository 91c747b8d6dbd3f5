/**
 * The LMDB environment behind the embedded store: one memory-mapped file, `${dataDir}/store.mdb`, holding
 * named sub-databases. Every process that opens the same data directory maps the same file; LMDB's
 * single-writer lock (a robust process-shared mutex) serialises their write transactions, which is what
 * makes each read-check-write done in `transactionSync` atomic across processes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { open, type Database, type Key, type RootDatabase } from 'lmdb';
import type { Doc } from '../types.js';
import type { StoredSnapshot } from './snapshots.js';

export interface Env {
  root: RootDatabase;
  /** [collection, id] -> record. */
  records: Database<Doc, Key>;
  /** [collection, indexName, ...values, id] -> true. */
  indexes: Database<true, Key>;
  /** collection -> names of the indexes built for it, so that a newly declared index gets back-filled. */
  catalog: Database<string[], string>;
  /** snapshot key -> snapshot. */
  snapshots: Database<StoredSnapshot, string>;
  /** [shard, deadline, snapshot key] -> true, for `due`. */
  deadlines: Database<true, Key>;
}

/** Opens (creating when missing) the environment in `dataDir`. */
export function openEnv(dataDir: string): Env {
  fs.mkdirSync(dataDir, { recursive: true });
  const root = open({ path: path.join(dataDir, 'store.mdb') });
  return {
    root,
    records: root.openDB<Doc, Key>({ name: 'records' }),
    indexes: root.openDB<true, Key>({ name: 'indexes' }),
    catalog: root.openDB<string[], string>({ name: 'catalog' }),
    snapshots: root.openDB<StoredSnapshot, string>({ name: 'snapshots' }),
    deadlines: root.openDB<true, Key>({ name: 'deadlines' }),
  };
}
