import type { SnapshotRecord } from '../store/mod.js';
import { decode, type PersistedActor } from './protocol.js';
import { pendingDeadlines } from './timers.js';

/** What an operator (or the state-machine inspector) sees of a stored actor. */
export interface ActorDescription {
  key: string;
  shard: number;
  version: number;
  fence: number;
  updatedAt: string;
  status: string;
  value: unknown;
  context: unknown;
  /** Pending durable timers (the invoking child's id) and the kind's deadline (its name), with when. */
  deadlines: Array<{ id: string; until: string }>;
  /** Event ids remembered for de-duplication, oldest first. */
  recentEventIds: string[];
}

/** Decodes a stored snapshot into its state value, context and pending deadlines. */
export function describeSnapshot(record: SnapshotRecord): ActorDescription {
  const persisted = record.data as PersistedActor & { s: any };
  // The machine's durable timers, then the deadline the host keeps for the kind (`ActorKind.deadline`).
  const pending = [...pendingDeadlines(persisted.s), ...(persisted.d ? [{ id: persisted.d[0], until: persisted.d[1] }] : [])];
  const deadlines = pending.map((d) => ({ id: d.id, until: new Date(d.until).toISOString() }));
  return {
    key: record.key,
    shard: record.shard,
    version: record.version,
    fence: record.fence,
    updatedAt: new Date(record.updated_at).toISOString(),
    status: persisted.s?.status ?? 'unknown',
    value: persisted.s?.value ?? null,
    context: persisted.s?.context ?? null,
    deadlines,
    recentEventIds: (persisted.a ?? []).map(([id]) => id),
  };
}
