import type { JournalEntry, JournalStep } from './types.js';

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

/** An actor step's entry as every backend stores it (`kind/id` split at the first slash; `reply` only when given). */
export function stepEntry(snapshotKey: string, shard: number, version: number, at: number, step: JournalStep): Omit<JournalEntry, 'seq'> {
  const slash = snapshotKey.indexOf('/');
  const entry: Omit<JournalEntry, 'seq'> = {
    key: snapshotKey,
    kind: slash < 0 ? snapshotKey : snapshotKey.slice(0, slash),
    id: slash < 0 ? '' : snapshotKey.slice(slash + 1),
    shard,
    version,
    at,
    value: step.value ?? null,
    events: step.events,
  };
  if (step.reply !== undefined) entry.reply = step.reply;
  return entry;
}
