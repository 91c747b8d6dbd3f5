import { describeSnapshot, type ActorDescription, type JournalEvent } from '../../../actors/mod.js';
import type { Store } from '../../../store/mod.js';

/**
 * An actor's committed steps, as the inspector streams and replays them. The source is the shared journal
 * (`store.journal.ofActor`): every process of a deployment reads the same store (one LMDB data dir on the
 * host, or MongoDB), so an edge follows an actor wherever it is hosted, across worker processes, with no
 * message from the worker. A tail reads the actor's entries after the last version it sent, every
 * `intervalMs` while a client is connected.
 */
export interface Step {
  seq: number;
  version: number;
  /** Commit time, ms since epoch. */
  at: number;
  value: unknown;
  events: JournalEvent[];
}

/** The newest `last` steps of an actor (oldest first). */
export async function recentSteps(store: Store, key: string, last: number): Promise<Step[]> {
  return (await store.journal.ofActor(key, { last })).map(toStep);
}

/** Steps of an actor after `afterVersion` (oldest first, at most `limit`). */
export async function stepsAfter(store: Store, key: string, afterVersion: number, limit: number): Promise<Step[]> {
  return (await store.journal.ofActor(key, { afterVersion, limit })).map(toStep);
}

const toStep = (e: { seq: number; version: number; at: number; value: unknown; events: JournalEvent[] }): Step => ({
  seq: e.seq,
  version: e.version,
  at: e.at,
  value: e.value,
  events: e.events,
});

/** The stored snapshot of an actor, described, or null. */
export async function currentSnapshot(store: Store, key: string): Promise<ActorDescription | null> {
  const record = await store.snapshots.get(key);
  return record ? describeSnapshot(record) : null;
}

export interface TailOptions {
  store: Store;
  key: string;
  afterVersion: number;
  intervalMs: number;
  /** New steps (never empty), then the snapshot they lead to; awaited before the next read. */
  onSteps: (steps: Step[], snapshot: ActorDescription | null) => void | Promise<void>;
  onError: (err: unknown) => void;
}

/** Follows an actor's steps until the returned function is called. */
export function tailSteps(o: TailOptions): () => void {
  let after = o.afterVersion;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  const poll = async () => {
    try {
      for (;;) {
        const steps = await stepsAfter(o.store, o.key, after, 100);
        if (stopped || steps.length === 0) break;
        after = steps[steps.length - 1].version;
        await o.onSteps(steps, await currentSnapshot(o.store, o.key));
        if (steps.length < 100) break;
      }
    } catch (err) {
      o.onError(err);
    }
    if (!stopped) timer = setTimeout(poll, o.intervalMs);
  };
  timer = setTimeout(poll, 0);
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}
