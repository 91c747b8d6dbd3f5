import { StoreDuplicateError, type Collection, type Doc, type Store } from '../../store/mod.js';

/** One journaled event of a session, stored as its wire JSON so that a replay sends it as it was. */
export interface JournalEntry extends Doc {
  session_id: string;
  sequence: number;
  /** The event's wire JSON. */
  event: string;
}

/**
 * The session journals: one record per journaled event, keyed by session and sequence (unique), so that a
 * session's history never grows its actor snapshot and a replay reads one key range.
 */
export class Journal {
  private readonly entries: Collection<JournalEntry>;

  constructor(store: Store) {
    this.entries = store.collection<JournalEntry>({ name: 'session_journal', indexes: [{ fields: ['session_id', 'sequence'], unique: true }] });
  }

  /** Writes an entry; false when that sequence of the session is already journaled (a retry or a replayed effect). */
  async append(sessionId: string, sequence: number, event: string): Promise<boolean> {
    try {
      await this.entries.insert({ id: `${sessionId}:${String(sequence).padStart(10, '0')}`, session_id: sessionId, sequence, event });
      return true;
    } catch (err) {
      if (err instanceof StoreDuplicateError) return false;
      throw err;
    }
  }

  /** The entries after `cursor`, in sequence order. */
  after(sessionId: string, cursor: number, limit = 10_000): Promise<JournalEntry[]> {
    return this.entries.find({ session_id: sessionId, sequence: { $gt: cursor } }, { sort: { sequence: 1 }, limit });
  }

  /** One entry, or null. */
  at(sessionId: string, sequence: number): Promise<JournalEntry | null> {
    return this.entries.get(`${sessionId}:${String(sequence).padStart(10, '0')}`);
  }
}
