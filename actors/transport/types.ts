/**
 * The transport between edges and actor hosts: request/reply to an actor's shard subject, one-way
 * messages, and publish/subscribe on topics. Payloads are bytes (msgpackr-encoded by the callers).
 * Two implementations with the same semantics: in-process (`inproc.ts`) and NATS (`nats.ts`).
 *
 * Subjects are NATS subjects: dot-separated tokens; subscriptions may use `*` (one token) and `>` (the
 * rest, last token only). Both implementations honour them the same way.
 */

/** Why a request failed without an answer. */
export type TransportErrorCode = 'NO_RESPONDERS' | 'TIMEOUT' | 'CLOSED';

export class TransportError extends Error {
  constructor(
    readonly code: TransportErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'TransportError';
  }
}

/** Answers a request; absent for one-way messages. */
export type Respond = (data: Uint8Array) => void;

/**
 * Message headers (NATS headers; passed along by reference in-process). They carry W3C trace context
 * (`traceparent`, `tracestate`) when tracing is on, and are absent otherwise.
 */
export type Headers = Record<string, string>;

/** Receives a message; `respond` is set when the sender awaits an answer. */
export type Handler = (data: Uint8Array, respond: Respond | null, subject: string, headers?: Headers) => void;

export interface Subscription {
  /** Stops delivery. Messages already handed to the handler are not recalled. */
  unsubscribe(): void;
}

export interface SubscribeOptions {
  /** Queue group: each message goes to one member of the group instead of every subscriber. */
  queue?: string;
}

export interface Transport {
  /** `inproc` or `nats`. */
  readonly kind: string;
  /**
   * Sends a request and resolves with the first answer. Rejects with `TransportError` `NO_RESPONDERS`
   * when nobody subscribes to the subject (immediately, as NATS does), `TIMEOUT` when no answer came
   * within `timeoutMs`, `CLOSED` after `close()`.
   */
  request(subject: string, data: Uint8Array, timeoutMs: number, headers?: Headers): Promise<Uint8Array>;
  /** Fire-and-forget to every subscriber of the subject (one per queue group). */
  publish(subject: string, data: Uint8Array): void;
  subscribe(subject: string, handler: Handler, options?: SubscribeOptions): Subscription;
  /** Waits until everything published so far has reached the server (NATS) or been delivered (in-process). */
  flush(): Promise<void>;
  close(): Promise<void>;
  /**
   * Calls `listener` each time the connection to the server is back after it was lost (NATS only: the other
   * transports never lose one). What was published to this process's subscriptions meanwhile did not reach
   * them. Returns the function that stops the calls.
   */
  onReconnect?(listener: () => void): () => void;
}
