/**
 * The transport between the edges and the actor hosts, with implementations of one contract:
 *
 * - `createInprocTransport()`: in-process, for the embedded single-process default;
 * - `connectNatsTransport(url)`: NATS core over nats.js v3, for multi-node deployments; it also exposes
 *   its `connection` for the placement leases and other JetStream users. It waits for a server that is not
 *   reachable yet (`nats-connect.ts`), so the roles of a deployment can start in any order;
 * - `portTransport(port)`: a thread's transport whose other end (`servePort`) is another thread's in-process
 *   transport: the embedded default's edge thread reaches the actors of its main thread over it.
 *
 * Both honour NATS subject wildcards (`*`, `>`), queue groups, first-answer-wins requests and fail
 * requests with `TransportError` (`NO_RESPONDERS`, `TIMEOUT`, `CLOSED`); `publish` and `subscribe` throw
 * `CLOSED` after `close()`. Handlers run asynchronously, never inside the sender's call, and must not
 * throw: a throw surfaces as an uncaught exception on both (nats.js would otherwise stop reading).
 * Payloads are passed without copying; treat them as immutable. The NATS and port transports call `arrived`
 * (an option) before handling what came from another thread or process: the runtime refreshes its store's
 * reads there, so a handler reads every write its sender had seen committed.
 *
 * @module
 */
export { TransportError } from './types.js';
export type {
  Handler,
  Respond,
  SubscribeOptions,
  Subscription,
  Transport,
  TransportErrorCode,
} from './types.js';
export { createInprocTransport } from './inproc.js';
export { portTransport, servePort } from './port.js';
export { connectNatsTransport, type NatsTransport, type NatsTransportOptions } from './nats.js';
export { connectNats, NATS_RETRY_MS, NATS_WAIT_WARN_MS, NatsCredentialsError, NatsUrlError, parseNatsUrl, type NatsWaitLog } from './nats-connect.js';
export type { Arrived } from './arrival.js';
export { isLiteralSubject, isSubscriptionSubject, subjectMatches } from './subject.js';
