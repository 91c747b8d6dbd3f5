import type { JournalEntry, JournalStore } from '../types.js';
import { entryToStore, type AppendedEntry } from '../journal-entry.js';
import { SEQ_KEY, type Env } from './env.js';
import { isKeyString } from './keys.js';

/**
 * A journal entry as stored under its seq. `p` is the seq of the entry before it with the same key (none on
 * a key's first entry): a key's entries form a chain, newest to oldest, so that `ofActor` needs no index.
 */
export type StoredEntry = Omit<JournalEntry, 'seq'> & { p?: number };

/**
 * Where a key's chain of entries is: the seqs of its first and its last entry. An actor's are in its snapshot
 * header (`StoredSnapshot.journal`), written anyway by its step; any other key's (an appended entry's, or an
 * actor's whose snapshot was deleted) in `Env.journalHeads`. A key's ends are in one of the two places only.
 *
 * Why not an index of [key, version, seq]: a step's entry lands at the end of the journal, among the other
 * entries of its commit, but its index entry lands on a page of its own, and every page a commit writes is
 * one more for its flush to wait on (bench/README.md, twenty-first session).
 */
export type JournalEnds = [first: number, last: number];

/**
 * Appends one entry inside the caller's group-commit write (the snapshot's, for an actor step) after the
 * key's chain (`ends`: none for its first entry) and returns the chain's new ends, the new entry's seq last
 * (`Env.nextSeq`: LMDB has one writer at a time across threads and processes, so seqs increase in commit
 * order and a reader never sees a later seq committed before an earlier one). The caller stores the ends. The
 * entry is encoded once, by this put.
 */
export function appendInTransaction(env: Env, entry: StoredEntry, ends: JournalEnds | undefined): JournalEnds {
  const seq = env.nextSeq();
  if (ends) entry.p = ends[1];
  env.journal.putSync(seq, entry);
  return [ends ? ends[0] : seq, seq];
}

/** A stored entry as the journal's readers get it (the chain's link is the store's own). */
function entryOf(seq: number, stored: StoredEntry): JournalEntry {
  const { p: _, ...entry } = stored;
  return { seq, ...entry };
}

/** The embedded journal: entries by seq, each linked to the one before it with the same key. */
export class LmdbJournal implements JournalStore {
  constructor(private readonly env: Env) {}

  async read(after: number, limit: number): Promise<JournalEntry[]> {
    if (limit <= 0) return [];
    const entries: JournalEntry[] = [];
    for (const { key: seq, value } of this.env.journal.getRange({ start: Math.max(0, Math.floor(after)) + 1, limit })) {
      entries.push(entryOf(seq, value));
    }
    return entries;
  }

  /**
   * Walks the key's chain from its newest entry back, so that reading its newest entries (`last`, a version
   * not long ago) costs what it returns; its oldest entries cost the whole chain, except the first alone
   * (an owner's lookup), which its ends name.
   */
  async ofActor(actorKey: string, opts: { afterVersion?: number; limit?: number; last?: number } = {}): Promise<JournalEntry[]> {
    if (!isKeyString(actorKey)) return [];
    const ends = journalEnds(this.env, actorKey);
    const after = opts.afterVersion ?? -1;
    const limit = opts.limit === undefined ? Infinity : Math.max(0, opts.limit);
    const last = opts.last === undefined ? Infinity : Math.max(0, opts.last);
    if (!ends || limit === 0 || last === 0) return [];
    // The first entry alone, by the chain's ends. A lookup past a version (a retry's) is nearer the newest end,
    // where the walk starts, and is the newest run's alone.
    if (limit === 1 && opts.last === undefined && opts.afterVersion === undefined) {
      const first = this.env.journal.get(ends[0]);
      if (first && first.version > after) return [entryOf(ends[0], first)];
    }
    const newestFirst: JournalEntry[] = [];
    for (let seq: number | undefined = ends[1]; seq !== undefined && newestFirst.length < last; ) {
      const stored = this.env.journal.get(seq);
      if (!stored) break;
      if (stored.version > after) {
        newestFirst.push(entryOf(seq, stored));
        // An actor's step versions fall by one along its chain: the one just past `after` is the last to read.
        if (stored.version === after + 1 && after >= 0) break;
      }
      // The rest are older still (an appended entry, version 0, is not a step).
      else if (stored.version > 0) break;
      seq = stored.p;
    }
    newestFirst.reverse();
    return newestFirst.length > limit ? newestFirst.slice(0, limit) : newestFirst;
  }

  async append(entry: AppendedEntry): Promise<number> {
    if (!isKeyString(entry.key)) throw new TypeError(`invalid journal key ${JSON.stringify(entry.key)}`);
    return this.env.batch(() => {
      // Built afresh by each run of the batch (a batch may run twice), as the link it gets may differ.
      const stored: StoredEntry = entryToStore(entry);
      const header = this.env.snapshots.get(entry.key);
      // Appended to an actor's own chain, if the key is an actor's: its ends stay in its header.
      if (header) {
        const ends = appendInTransaction(this.env, stored, header.journal);
        this.env.snapshots.putSync(entry.key, { ...header, journal: ends });
        return ends[1];
      }
      const ends = appendInTransaction(this.env, stored, this.env.journalHeads.get(entry.key));
      this.env.journalHeads.putSync(entry.key, ends);
      return ends[1];
    });
  }

  async head(): Promise<number> {
    return this.env.meta.get(SEQ_KEY) ?? 0;
  }
}

/** The ends of `key`'s chain of entries, wherever they are (see `JournalEnds`). */
function journalEnds(env: Env, key: string): JournalEnds | undefined {
  return env.snapshots.get(key)?.journal ?? env.journalHeads.get(key);
}
