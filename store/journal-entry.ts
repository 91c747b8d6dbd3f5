import type { JournalEntry } from './types.js';

/** What `JournalStore.append` takes: an entry without its seq (the store assigns it), `at` defaulting to now. */
export type AppendedEntry = Omit<JournalEntry, 'seq' | 'at'> & { at?: number };

/** An appended entry as every backend stores it: its own fields only, `at` and `value` filled in. */
export function entryToStore(entry: AppendedEntry): Omit<JournalEntry, 'seq'> {
  return {
    key: entry.key,
    kind: entry.kind,
    id: entry.id,
    shard: entry.shard,
    version: entry.version,
    at: entry.at ?? Date.now(),
    value: entry.value ?? null,
    events: entry.events,
  };
}
