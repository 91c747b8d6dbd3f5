/**
 * Projections: read models built from the journal by a runner that follows it from a stored checkpoint,
 * off the reply path (a worker thread embedded, worker processes over NATS).
 */
export { projectors } from './registry.js';
export type { Projector, ProjectorStatus } from './types.js';
