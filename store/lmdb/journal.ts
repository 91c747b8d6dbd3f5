import type { JournalEntry, JournalStore } from '../types.js';
import { entryToStore, type AppendedEntry } from '../journal-entry.js';
import { SEQ_KEY, type Env } from './env.js';
import { END, isKeyString, key } from './keys.js';

/** A journal entry as stored under its seq. */
export type StoredEntry = Omit<JournalEntry, 'seq'>;

/**
 * Appends one entry inside the caller's group-commit write (the snapshot's, for an actor step) and returns
 * its seq (`Env.nextSeq`: LMDB has one writer at a time across threads and processes, so seqs increase in
 * commit order and a reader never sees a later seq committed before an earlier one). The entry is encoded
 * once, by this put.
 */
export function appendInTransaction(env: Env, entry: StoredEntry): number {
  const seq = env.nextSeq();
  env.journal.putSync(seq, entry);
  env.journalByActor.putSync(key(entry.key, entry.version, seq), true);
  return seq;
}

/** The embedded journal: entries by seq, plus an index by actor key and version. */
export class LmdbJournal implements JournalStore {
  constructor(private readonly env: Env) {}

  async read(after: number, limit: number): Promise<JournalEntry[]> {
    if (limit <= 0) return [];
    const entries: JournalEntry[] = [];
    for (const { key: seq, value } of this.env.journal.getRange({ start: Math.max(0, Math.floor(after)) + 1, limit })) {
      entries.push({ seq, ...value });
    }
    return entries;
  }

  async ofActor(actorKey: string, opts: { afterVersion?: number; limit?: number; last?: number } = {}): Promise<JournalEntry[]> {
    if (!isKeyString(actorKey)) return [];
    const after = opts.afterVersion ?? -1;
    const start = key(actorKey, after + 1);
    const end = key(actorKey, END);
    const keys = opts.last !== undefined
      ? [...this.env.journalByActor.getKeys({ start: end, end: start, reverse: true, limit: Math.max(0, opts.last) })].reverse()
      : [...this.env.journalByActor.getKeys({ start, end, ...(opts.limit !== undefined ? { limit: Math.max(0, opts.limit) } : {}) })];
    const entries: JournalEntry[] = [];
    for (const k of keys) {
      const seq = (k as unknown[])[2] as number;
      const value = this.env.journal.get(seq);
      if (value) entries.push({ seq, ...value });
    }
    return opts.last !== undefined && opts.limit !== undefined ? entries.slice(0, Math.max(0, opts.limit)) : entries;
  }

  async append(entry: AppendedEntry): Promise<number> {
    if (!isKeyString(entry.key)) throw new TypeError(`invalid journal key ${JSON.stringify(entry.key)}`);
    const stored: StoredEntry = entryToStore(entry);
    return this.env.batch(() => appendInTransaction(this.env, stored));
  }

  async head(): Promise<number> {
    return this.env.meta.get(SEQ_KEY) ?? 0;
  }
}
