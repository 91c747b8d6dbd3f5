/**
 * Projections: read models built from the journal by a runner that follows it from stored checkpoints,
 * off the reply path (a worker thread embedded, the worker processes over NATS, partitioned by shard).
 */
export { projectors } from './registry.js';
export { Projections, type ProjectionOptions } from './projections.js';
export { ProjectionStatus } from './status.js';
export { partitionOf } from './runner.js';
export type { Partitioning, Projector, ProjectorStatus } from './types.js';
