import { DEFAULT_SHARDS, shardOf } from './shard.js';
import type { Placement, PlacementEvents, WorkerDirectory, WorkerInfo } from './types.js';
import { defaultWorkerId } from './worker-id.js';

/** Options of `createLocalPlacement`. */
export interface LocalPlacementOptions {
  shardCount?: number;
  workerId?: string;
  /** The actor kinds the worker hosts, for `info()`. */
  kinds?: string[];
  /**
   * The fence every write carries (default 1): the runtime passes the store's highest (`highestFence`), so that
   * a data directory last written over NATS, whose fences are lease revisions, is not refused as stale.
   */
  fence?: number;
}

/** The embedded placement, which also describes its single worker. */
export interface LocalPlacement extends Placement {
  /** This worker as a directory would list it. */
  info(): WorkerInfo;
}

/**
 * The embedded default: one process, one worker, every shard owned with one fence from `start` to `stop`.
 * Nothing else can write the store, so a constant fence suffices; it is the store's highest when the worker
 * starts (`LocalPlacementOptions.fence`), which no stored snapshot's fence exceeds.
 */
export function createLocalPlacement(options: LocalPlacementOptions = {}): LocalPlacement {
  const shardCount = options.shardCount ?? DEFAULT_SHARDS;
  const workerId = options.workerId ?? defaultWorkerId();
  const startedAt = new Date().toISOString();
  const all = Array.from({ length: shardCount }, (_, i) => i);
  const fence = Math.max(1, options.fence ?? 1);
  let events: PlacementEvents | undefined;
  let owning = false;
  let liveActors = 0;
  let stopDone: Promise<void> | undefined;

  return {
    workerId,
    shardCount,
    shardOf: (key) => shardOf(key, shardCount),
    fenceOf: (shard) => (owning && shard >= 0 && shard < shardCount ? fence : null),
    owned: () => (owning ? [...all] : []),
    async start(handlers) {
      if (events) throw new Error('placement already started');
      events = handlers;
      owning = true;
      await Promise.all(all.map((shard) => handlers.acquired(shard, fence)));
    },
    stop() {
      const handlers = events;
      if (!handlers) return Promise.resolve();
      stopDone ??= (async () => {
        // As with NATS, a failing handler does not keep the shard: the process is stopping.
        await Promise.allSettled(all.map((shard) => handlers.releasing(shard)));
        owning = false;
      })();
      return stopDone;
    },
    reportLiveActors(count) {
      liveActors = count;
    },
    info: () => ({
      id: workerId,
      shards: owning ? [...all] : [],
      liveActors,
      kinds: options.kinds ?? [],
      startedAt,
      seenAt: new Date().toISOString(),
    }),
  };
}

/** The directory of the embedded deployment: its one worker while it owns its shards. */
export function createLocalWorkerDirectory(placement: LocalPlacement): WorkerDirectory {
  return {
    async workers() {
      return placement.owned().length > 0 ? [placement.info()] : [];
    },
  };
}
