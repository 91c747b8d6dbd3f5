// TEMPORARY: the journal contract's types (HELPERS.md), until branch `journal` lands them; deleted at the merge.
import type { Store } from '../../store/mod.js';

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
export const journalOf = (store: Store): JournalStore => (store as unknown as { journal: JournalStore }).journal;
