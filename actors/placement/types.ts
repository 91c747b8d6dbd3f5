/**
 * Placement: which worker hosts which shard. Actor keys (`kind/id`) hash to a fixed number of shards; a
 * worker owns a shard through a lease whose revision is the fencing token written with every snapshot.
 */

/** A live worker as the cluster sees it. */
export interface WorkerInfo {
  id: string;
  /** Shards this worker owns now. */
  shards: number[];
  /** Live (activated) actors on this worker, as it last reported. */
  liveActors: number;
  /** The actor kinds this worker hosts (`ActorKind.name`). */
  kinds: string[];
  startedAt: string;
  /** When this record was last refreshed (ISO). */
  seenAt: string;
}

/** What the placement tells the host about. */
export interface PlacementEvents {
  /** The worker now owns `shard`; `fence` is the lease revision to write snapshots with. */
  acquired(shard: number, fence: number): void | Promise<void>;
  /**
   * The worker must give up `shard` (it is moving to a worker that joined, or this one is stopping):
   * passivate its actors before resolving. The lease is released after the promise settles.
   */
  releasing(shard: number): Promise<void>;
  /** The lease was lost without a release (it expired, e.g. after a stall): drop the shard's actors now. */
  lost(shard: number): void;
}

export interface Placement {
  readonly workerId: string;
  readonly shardCount: number;
  /** The shard of an actor key: a stable hash, the same on every node. */
  shardOf(key: string): number;
  /** The fencing token of an owned shard whose lease is known valid now, else null. */
  fenceOf(shard: number): number | null;
  /** Shards owned now. */
  owned(): number[];
  /** Starts taking leases; events go to `events`. Resolves after the first balancing round. */
  start(events: PlacementEvents): Promise<void>;
  /** Releases every lease (after `releasing` for each) and stops. */
  stop(): Promise<void>;
  /** Reports this worker's live actor count with its next heartbeat. */
  reportLiveActors(count: number): void;
}

/** How many workers are alive and which shards are owned: what a health watch needs, cheaper than `workers()`. */
export interface Ownership {
  liveWorkers: number;
  ownedShards: number[];
}

/** Reads the cluster's workers (for the admin API), from any role. */
export interface WorkerDirectory {
  workers(): Promise<WorkerInfo[]>;
  /** The counts alone, where the directory can read them without every record (else derived from `workers()`). */
  ownership?(): Promise<Ownership>;
}
