import { DEFAULT_SHARDS, shardOf } from './shard.js';
import type { Placement, PlacementEvents, WorkerDirectory, WorkerInfo } from './types.js';
import { defaultWorkerId } from './worker-id.js';

/** Options of `createLocalPlacement`. */
export interface LocalPlacementOptions {
  shardCount?: number;
  workerId?: string;
  /** The actor kinds the worker hosts, for `info()`. */
  kinds?: string[];
}

/** The embedded placement, which also describes its single worker. */
export interface LocalPlacement extends Placement {
  /** This worker as a directory would list it. */
  info(): WorkerInfo;
}

/**
 * The embedded default: one process, one worker, every shard owned with fence 1 from `start` to `stop`.
 * Nothing else can write the store, so a constant fence suffices.
 */
export function createLocalPlacement(options: LocalPlacementOptions = {}): LocalPlacement {
  const shardCount = options.shardCount ?? DEFAULT_SHARDS;
  const workerId = options.workerId ?? defaultWorkerId();
  const startedAt = new Date().toISOString();
  const all = Array.from({ length: shardCount }, (_, i) => i);
  let events: PlacementEvents | undefined;
  let owning = false;
  let liveActors = 0;
  let stopDone: Promise<void> | undefined;

  return {
    workerId,
    shardCount,
    shardOf: (key) => shardOf(key, shardCount),
    fenceOf: (shard) => (owning && shard >= 0 && shard < shardCount ? 1 : null),
    owned: () => (owning ? [...all] : []),
    async start(handlers) {
      if (events) throw new Error('placement already started');
      events = handlers;
      owning = true;
      await Promise.all(all.map((shard) => handlers.acquired(shard, 1)));
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
