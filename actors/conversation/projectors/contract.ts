/**
 * The journal contract's types (HELPERS.md), until branch `journal` is merged: then these come from
 * `store/mod.ts` and `actors/projection/mod.ts`, and this file goes.
 */
import type { Store } from '../../../store/mod.js';

export interface JournalEvent {
  type: string;
  data: Record<string, unknown>;
}
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
export interface Projector {
  name: string;
  kinds?: string[];
  apply(entries: JournalEntry[], store: Store): Promise<void>;
  reset(store: Store): Promise<void>;
}
