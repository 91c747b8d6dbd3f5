import type { ClientSession, Collection as MongoCollectionHandle } from 'mongodb';
import type { JournalEntry, JournalStore } from '../types.js';
import { entryToStore, type AppendedEntry } from '../journal-entry.js';

/** A journal entry document: the seq is `_id`. */
export interface EntryDoc extends Omit<JournalEntry, 'seq'> {
  _id: number;
}

/** The counter document holding the last seq assigned. */
export interface CounterDoc {
  _id: string;
  seq: number;
}

const SEQ = 'journal.seq';

/**
 * The journal in MongoDB: entries in the `journal` collection (indexed by key, version and seq for
 * `ofActor`), seqs from a counter document in `journal_counters`. An entry is appended in a transaction
 * together with the counter's increment (and, for an actor step, with its snapshot): two transactions that
 * both increment the counter conflict, so the second commits after the first and seqs follow commit order.
 * Transactions need a replica set (a single-node one will do); see docs/configuration.md.
 */
export class MongoJournal implements JournalStore {
  constructor(
    private readonly entries: MongoCollectionHandle<EntryDoc>,
    private readonly counters: MongoCollectionHandle<CounterDoc>,
    private readonly withSession: <T>(work: (session: ClientSession) => Promise<T>) => Promise<T>,
  ) {}

  /** Appends inside the caller's transaction; returns the seq. */
  async appendIn(session: ClientSession, entry: Omit<JournalEntry, 'seq'>): Promise<number> {
    const counter = await this.counters.findOneAndUpdate({ _id: SEQ }, { $inc: { seq: 1 } }, { upsert: true, returnDocument: 'after', session });
    const seq = counter!.seq;
    await this.entries.insertOne({ _id: seq, ...entry }, { session });
    return seq;
  }

  async read(after: number, limit: number): Promise<JournalEntry[]> {
    if (limit <= 0) return [];
    const docs = await this.entries.find({ _id: { $gt: after } }).sort({ _id: 1 }).limit(limit).toArray();
    return docs.map(toEntry);
  }

  async ofActor(key: string, opts: { afterVersion?: number; limit?: number; last?: number } = {}): Promise<JournalEntry[]> {
    const filter = { key, version: { $gt: opts.afterVersion ?? -1 } };
    if (opts.last !== undefined) {
      if (opts.last <= 0) return [];
      const docs = await this.entries.find(filter).sort({ version: -1, _id: -1 }).limit(opts.last).toArray();
      const entries = docs.reverse().map(toEntry);
      return opts.limit !== undefined ? entries.slice(0, Math.max(0, opts.limit)) : entries;
    }
    if (opts.limit !== undefined && opts.limit <= 0) return [];
    const cursor = this.entries.find(filter).sort({ version: 1, _id: 1 });
    if (opts.limit !== undefined) cursor.limit(opts.limit);
    return (await cursor.toArray()).map(toEntry);
  }

  async append(entry: AppendedEntry): Promise<number> {
    const stored = entryToStore(entry);
    let seq = 0;
    await this.withSession((session) =>
      session.withTransaction(async () => {
        seq = await this.appendIn(session, stored);
      }),
    );
    return seq;
  }

  async head(): Promise<number> {
    return (await this.counters.findOne({ _id: SEQ }))?.seq ?? 0;
  }
}

function toEntry(doc: EntryDoc): JournalEntry {
  const { _id, ...rest } = doc;
  return { seq: _id, ...rest };
}
