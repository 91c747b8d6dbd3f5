import { newEventId } from './event-id.js';
import { shardKey, unownedReason, type RuntimeHealth } from './health.js';
import { shardOf } from './placement/shard.js';
import { decode, encodeFor, shardSubject, type HostErrorCode, type Reply } from './protocol.js';
import { TransportError, type Transport } from './transport/types.js';
import { inSpan, SpanKind, traceHeaders, tracingStarted } from '../platform/telemetry.js';

export class ActorAskError extends Error {
  constructor(
    readonly code: HostErrorCode | 'DEADLINE',
    message: string,
  ) {
    super(message);
    this.name = 'ActorAskError';
  }
}

export interface AskOptions {
  /** Give up after this long (all retries included). */
  timeoutMs?: number;
  /** Idempotency key; a fresh one by default. Pass the same one to make a caller-level retry safe. */
  eventId?: string;
  /**
   * For an actor's effect whose answer goes only into its own next step: that step's commit is queued after
   * the asked step's on the same host, so it can never be durable without it, and the answer may come once the
   * asked step's commit is queued instead of once it is durable. The host honours it only for an ask from its
   * own thread (its commit order is the asker's); anywhere else the answer waits for durability as usual.
   */
  ordered?: boolean;
  /**
   * Told each time an attempt is retried (no owner, a new owner, a timeout): the answer may then come from another
   * worker than the one first asked, which may have died between a step's commit and its publication.
   */
  retried?: () => void;
}

const FIRST_BACKOFF_MS = 20;
const MAX_BACKOFF_MS = 500;
const MAX_ATTEMPT_MS = 2000;
/**
 * A shard with no subscriber for this long within one ask is reported as unowned (health.ts); shorter gaps
 * are handovers between workers, which retries ride out.
 */
export const NO_OWNER_GRACE_MS = 1000;

/**
 * Sends events to actors wherever they live. An ask is retried with the same event id while the shard has
 * no owner (no responders), its owner changes (not owner, stale) or an attempt times out, until the
 * deadline: the actor applies the event once however many attempts reach it. Each attempt tells the host how
 * much of the deadline is left, and the host skips an event whose asker has given up.
 */
export class ActorClient {
  constructor(
    private readonly transport: Transport,
    private readonly o: { shardCount: number; timeoutMs: number; health?: RuntimeHealth },
  ) {}

  /**
   * Asks actor `kind/id` and resolves with its reply. Traced as an `actor.ask` client span whose context
   * travels with every attempt in the message headers.
   */
  ask<T = unknown>(kind: string, id: string, event: { type: string } & Record<string, unknown>, options: AskOptions = {}): Promise<T> {
    // Without a tracer provider a span is a no-op that still costs a context switch and allocations per ask.
    if (!tracingStarted()) return this.attempt<T>(kind, id, event, options, undefined);
    const attributes = { 'actor.kind': kind, 'actor.id': id, 'actor.event': event.type, ...(kind === 'conversation' ? { 'conversation.id': id } : {}) };
    return inSpan('actor.ask', { kind: SpanKind.CLIENT, attributes }, () => this.attempt<T>(kind, id, event, options, traceHeaders()));
  }

  private async attempt<T>(kind: string, id: string, event: { type: string } & Record<string, unknown>, options: AskOptions, headers: Record<string, string> | undefined): Promise<T> {
    const deadline = Date.now() + (options.timeoutMs ?? this.o.timeoutMs);
    const eventId = options.eventId ?? newEventId();
    const shard = shardOf(`${kind}/${id}`, this.o.shardCount);
    const subject = shardSubject(shard);
    const health = this.o.health;
    let backoff = FIRST_BACKOFF_MS;
    let last = 'no attempt';
    let noOwnerSince: number | null = null;
    let failingSince: number | null = null;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) {
        if (noOwnerSince !== null) health?.report(shardKey(shard), unownedReason(shard));
        throw new ActorAskError('DEADLINE', `${kind}/${id}: no answer before the deadline (${last})`);
      }
      try {
        // The host skips the event once the whole ask's deadline has passed (`Envelope.waitMs`). Not this
        // attempt's timeout: a retry with the same event id, queued behind everything that came meanwhile, would
        // then stand in for an event already near the front of the mailbox, and under a backlog longer than an
        // attempt no attempt would ever be applied.
        const data = encodeFor(this.transport, options.ordered ? { kind, id, event, eventId, waitMs: left, ordered: true } : { kind, id, event, eventId, waitMs: left });
        const reply = decode<Reply>(await this.transport.request(subject, data, Math.min(left, MAX_ATTEMPT_MS), headers));
        if (health?.has(shardKey(shard))) health.clear(shardKey(shard));
        if (reply.ok) return reply.reply as T;
        if (!reply.retry) throw new ActorAskError(reply.code, reply.message);
        last = `${reply.code}: ${reply.message}`;
        // An ask given longer than the usual time waits that long for its actor to work, not for its store to come
        // back: a store that refuses every commit (a full disk) would otherwise have the event run and fail again,
        // model calls and all, for a whole turn's wait. Only the store's failures count: an owner's handover
        // (NOT_OWNER, STALE) during a long turn is what the longer wait is for, however many there are.
        if (reply.code === 'STORE_ERROR') {
          failingSince ??= Date.now();
          if (Date.now() - failingSince >= this.o.timeoutMs) throw new ActorAskError('DEADLINE', `${kind}/${id}: the store failing for ${this.o.timeoutMs} ms (${last})`);
        }
      } catch (err) {
        if (err instanceof ActorAskError) throw err;
        if (!(err instanceof TransportError) || err.code === 'CLOSED') throw err;
        last = err.code;
        // Nobody subscribes to the shard's subject: no worker owns it now (one may take it over shortly).
        if (err.code === 'NO_RESPONDERS') {
          noOwnerSince ??= Date.now();
          if (Date.now() - noOwnerSince >= NO_OWNER_GRACE_MS) health?.report(shardKey(shard), unownedReason(shard));
          // An ask given longer than the usual time (a turn that waits on a model) waits that long for its
          // actor to answer, not for a worker to come back: with none, it ends at the usual time.
          if (Date.now() - noOwnerSince >= this.o.timeoutMs) throw new ActorAskError('DEADLINE', `${kind}/${id}: no owner for ${this.o.timeoutMs} ms (${last})`);
        } else noOwnerSince = null;
      }
      options.retried?.();
      await new Promise((r) => setTimeout(r, Math.min(backoff, Math.max(0, deadline - Date.now()))));
      backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
    }
  }
}
