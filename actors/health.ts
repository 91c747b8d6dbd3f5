/**
 * What keeps this process from reaching actors, as operators need to see it: "no worker is alive", "no
 * worker owns shard 5". Each cause is logged at warn once when it appears and at info when it clears, and
 * is listed by `/healthz` (field `degraded`) and `/admin/v1/runtime` while it lasts. Two sources report
 * causes: the actor client (an ask that found nobody on a shard's subject) and a watch over the worker
 * directory (`watchPlacement`).
 */
import type { WorkerDirectory } from './placement/types.js';

/** One reason this process is degraded, and since when (ISO). */
export interface DegradedCause {
  reason: string;
  since: string;
}

export type HealthLog = (level: 'warn' | 'info', msg: string, extra?: object) => void;

/** The causes of degradation this process knows of now. */
export class RuntimeHealth {
  private readonly causes = new Map<string, DegradedCause>();

  constructor(private readonly log: HealthLog = () => {}) {}

  /** Records a cause under `key` (logged at warn the first time, until it is cleared). */
  report(key: string, reason: string): void {
    const known = this.causes.get(key);
    if (known?.reason === reason) return;
    this.causes.set(key, { reason, since: known?.since ?? new Date().toISOString() });
    this.log('warn', reason, { degraded: key });
  }

  /** The cause under `key` is over (logged at info if there was one). */
  clear(key: string): void {
    const known = this.causes.get(key);
    if (!known) return;
    this.causes.delete(key);
    this.log('info', `recovered: ${known.reason}`, { degraded: key, since: known.since });
  }

  /** Whether a cause is recorded under `key`. */
  has(key: string): boolean {
    return this.causes.has(key);
  }

  /** Every cause now, oldest first. */
  degraded(): DegradedCause[] {
    return [...this.causes.values()].sort((a, b) => (a.since < b.since ? -1 : a.since > b.since ? 1 : 0));
  }
}

/** The key of a shard's cause. */
export const shardKey = (shard: number) => `shard:${shard}`;
/** The reason given for a shard nobody answers for. */
export const unownedReason = (shard: number) => `no worker owns shard ${shard}`;

export interface PlacementWatchOptions {
  directory: WorkerDirectory;
  shardCount: number;
  health: RuntimeHealth;
  /** How often to read the directory. */
  intervalMs: number;
}

/**
 * Reads the worker directory every `intervalMs`: no live worker is one cause; with workers alive, a shard
 * found unowned on two reads in a row is one cause each (a single read may fall in a handover, which is
 * normal). Returns a stop function.
 */
export function watchPlacement(o: PlacementWatchOptions): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let unownedBefore = new Set<number>();
  const round = async () => {
    try {
      const { liveWorkers, ownedShards } = o.directory.ownership
        ? await o.directory.ownership()
        : await o.directory.workers().then((ws) => ({ liveWorkers: ws.length, ownedShards: ws.flatMap((w) => w.shards) }));
      o.health.clear('directory');
      if (liveWorkers === 0) {
        o.health.report('workers', 'no worker is alive: no actor can answer');
        unownedBefore = new Set();
        return;
      }
      o.health.clear('workers');
      const owned = new Set(ownedShards);
      const unowned = new Set<number>();
      for (let shard = 0; shard < o.shardCount; shard++) {
        if (owned.has(shard)) o.health.clear(shardKey(shard));
        else {
          unowned.add(shard);
          if (unownedBefore.has(shard)) o.health.report(shardKey(shard), unownedReason(shard));
        }
      }
      unownedBefore = unowned;
    } catch (err) {
      o.health.report('directory', `cannot read the worker directory: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const loop = () => {
    void round().finally(() => {
      if (!stopped) timer = setTimeout(loop, o.intervalMs).unref();
    });
  };
  loop();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
