/**
 * The actor runtime: XState machine actors hosted one activation at a time, persisted after every event,
 * placed on workers by shard leases, reached over a transport (in-process or NATS) from any role.
 */
export { ActorAskError, ActorClient, type AskOptions } from './client.js';
export { Host, type HostOptions } from './host.js';
export { decode, encode } from './protocol.js';
export { describeSnapshot, type ActorDescription } from './introspect.js';
export { builtinKinds, type ActorKind } from './kinds.js';
export { startRuntime, type Runtime, type RuntimeOptions } from './runtime.js';
export { earliestDeadline, sleepUntil, SLEEP_SRC } from './timers.js';
export { RuntimeHealth, watchPlacement, type DegradedCause } from './health.js';
export type { WorkerDirectory, WorkerInfo } from './placement/types.js';
export type { Subscription, Transport } from './transport/types.js';
export { NatsUrlError, parseNatsUrl } from './transport/nats-connect.js';
export type { JournalEntry, JournalEvent, JournalStore } from '../store/mod.js';
export { projectors, partitionOf, Projections, ProjectionStatus, type ProjectionOptions, type Partitioning, type Projector, type ProjectorStatus } from './projection/mod.js';
