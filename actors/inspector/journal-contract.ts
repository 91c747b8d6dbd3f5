import type { Store } from '../../store/mod.js';

/**
 * The journal contract's types (HELPERS.md, "The journal contract"), held here until branch `journal` is
 * merged; then `store/types.ts` and `actors/projection/` provide them and this file goes.
 */
export interface JournalEvent { type: string; data: Record<string, unknown> }
export interface JournalEntry {
  seq: number;
  key: string;
  kind: string;
  id: string;
  shard: number;
  version: number;
  at: number;
  value: unknown;
  events: JournalEvent[];
}
export interface JournalStore {
  read(after: number, limit: number): Promise<JournalEntry[]>;
  ofActor(key: string, opts?: { afterVersion?: number; limit?: number; last?: number }): Promise<JournalEntry[]>;
  append(entry: Omit<JournalEntry, 'seq' | 'at'> & { at?: number }): Promise<number>;
  head(): Promise<number>;
}
export interface Projector {
  name: string;
  kinds?: string[];
  apply(entries: JournalEntry[], store: Store): Promise<void>;
  reset(store: Store): Promise<void>;
}

/** The store's journal, when this build's store has one. */
export const journalOf = (store: Store): JournalStore | null => (store as unknown as { journal?: JournalStore }).journal ?? null;
