/**
 * Placement: which worker hosts which shard of actors. Actor keys hash to a fixed number of shards
 * (`shardOf`); a worker owns a shard through a lease whose revision is the fencing token written with
 * every snapshot.
 *
 * - `createLocalPlacement()`: the embedded default, one worker owning every shard with one fence (the store's highest when it starts, at least 1).
 * - `createNatsPlacement({connection})`: leases in a JetStream KV bucket, spread over the live workers by
 *   rendezvous hashing with bounded loads (`ownerOf`), taken over after the TTL when a worker dies; fences
 *   are the lease revisions plus the JetStream store's fence base, so a store that was lost and started empty
 *   goes on above the fences stored (`fenceFloor`).
 *
 * Each has a `WorkerDirectory` listing the workers for the admin API.
 *
 * @module
 */
export type { Placement, PlacementEvents, WorkerDirectory, WorkerInfo } from './types.js';
export { DEFAULT_SHARDS, ownerOf, shardOf } from './shard.js';
export {
  createLocalPlacement,
  createLocalWorkerDirectory,
  type LocalPlacement,
  type LocalPlacementOptions,
} from './local.js';
export { createNatsPlacement, createNatsWorkerDirectory, type NatsPlacementOptions } from './nats-leases.js';
export { defaultWorkerId } from './worker-id.js';
