import { MongoClient } from 'mongodb';
import { redeclared } from '../errors.js';
import type { Collection, CollectionSpec, Doc, IndexSpec, Store } from '../types.js';
import { MongoCollection, type StoredRecord } from './collection.js';
import { MongoJournal, type CounterDoc, type EntryDoc } from './journal.js';
import { MongoSnapshots, type SnapshotDoc } from './snapshots.js';

export interface MongoStoreOptions {
  /** A MongoDB connection string. */
  url: string;
  /** Database name; defaults to the one named in the connection string, else `switchboard`. */
  dbName?: string;
}

/**
 * Opens the MongoDB store: a thin pass-through of the store interface to the official driver. Snapshots
 * live in the `snapshots` collection and the journal in `journal` and `journal_counters`, so no record
 * collection may take those names. A snapshot and its journal entry are written in one transaction, which
 * needs a replica set (a single-node replica set will do); a standalone server refuses transactions.
 */
export async function openMongoStore(options: MongoStoreOptions): Promise<Store> {
  // Binary fields come back as Buffers, as the embedded backend returns them (not the driver's `Binary`).
  const client = new MongoClient(options.url, { promoteBuffers: true });
  await client.connect();
  const db = client.db(options.dbName ?? databaseInUrl(options.url) ?? 'switchboard');
  const snapshotsHandle = db.collection<SnapshotDoc>('snapshots');
  await snapshotsHandle.createIndex({ shard: 1, deadline: 1, _id: 1 });
  const entries = db.collection<EntryDoc>('journal');
  await entries.createIndex({ key: 1, version: 1, _id: 1 });
  const withSession = async <T>(work: (session: import('mongodb').ClientSession) => Promise<T>): Promise<T> => {
    const session = client.startSession();
    try {
      return await work(session);
    } finally {
      await session.endSession();
    }
  };
  const journal = new MongoJournal(entries, db.collection<CounterDoc>('journal_counters'), withSession);
  const snapshots = new MongoSnapshots(snapshotsHandle, journal, withSession);
  const collections = new Map<string, MongoCollection>();
  /** Whether each declared collection is a read model (see `CollectionSpec.readModel`), and its appended field. */
  const readModels = new Map<string, boolean>();
  const appended = new Map<string, string | null>();
  return {
    backend: 'mongodb',
    snapshots,
    journal,
    collection<T extends Doc = Doc>(spec: CollectionSpec): Collection<T> {
      const indexes = spec.indexes ?? [];
      let collection = collections.get(spec.name);
      if (!collection) {
        collection = new MongoCollection(db.collection<StoredRecord>(spec.name), spec.name, indexes);
        collections.set(spec.name, collection);
        readModels.set(spec.name, spec.readModel === true);
        appended.set(spec.name, spec.appended ?? null);
      } else if (indexSignature(collection.indexes) !== indexSignature(indexes)) {
        throw redeclared(spec, 'indexes');
      } else if (readModels.get(spec.name) !== (spec.readModel === true)) {
        // Kept apart only by the embedded store, but declared the same way everywhere, whatever the backend.
        throw redeclared(spec, 'readModel');
      } else if (appended.get(spec.name) !== (spec.appended ?? null)) {
        // Stored whole here (MongoDB rewrites a document whole anyway), but declared the same way everywhere.
        throw redeclared(spec, 'appended');
      }
      return collection as unknown as Collection<T>;
    },
    // Every MongoDB read is a new query against the primary: nothing to renew.
    refresh: () => undefined,
    // Made to be shared by any number of processes.
    otherProcesses: () => [],
    close: () => client.close(),
  };
}

function indexSignature(indexes: IndexSpec[]): string {
  return JSON.stringify(
    indexes.map((index) => [index.fields, index.unique === true, index.unique === true && index.sparse === true]),
  );
}

/** The database named by the path of a connection string (`mongodb://host1,host2/name?options`), if any. */
function databaseInUrl(url: string): string | undefined {
  const name = /^mongodb(?:\+srv)?:\/\/[^/]*\/([^?]*)/.exec(url)?.[1];
  return name ? decodeURIComponent(name) : undefined;
}
