import { assign, emit, fromPromise, setup } from 'xstate';

/**
 * One webhook delivery: one event to one endpoint, as a series of attempts until one succeeds or the retry
 * schedule runs out. Every attempt is the `attempt` effect (an HTTP POST, signed; provided by
 * `actors/delivery`); waits between attempts are the durable `sleepUntil` on an absolute deadline, so a
 * delivery survives restarts and failover with its schedule. The machine decides what an answer means
 * (2xx delivered; timeout, network error, 408, 429 and 5xx retried; anything else final) and when the next
 * attempt is due (at the schedule's offset from the series' start, never before the failed attempt ended, or
 * after the receiver's `Retry-After` when that is later, capped). `REDELIVER` starts a new series of attempts
 * for the same event (same event id).
 *
 * States: `new` (nothing asked yet) → `scheduling` (transient: straight to `attempting` when the first
 * offset is 0) → `waiting` (tag `pending`: until `nextAt`) ⇄ `attempting` (tags `pending`, `attempting`; its
 * child `watched` holds the attempt watchdog) → `delivered` or `failed` (tags `done` and their name);
 * `REDELIVER` from any state but `new` starts a new series through `scheduling`.
 */

/** Why an attempt got no HTTP answer, or was not made. */
export type AttemptErrorKind =
  /** No complete answer within the endpoint's `timeout_ms`. */
  | 'timeout'
  /** DNS, connect, TLS or a reset: retried. */
  | 'network'
  /** The URL resolved to a loopback or private address (refused unless private URLs are allowed). */
  | 'private_address'
  /** The endpoint was deleted. */
  | 'endpoint_deleted'
  /** The endpoint is disabled. */
  | 'endpoint_disabled';

/** What the `attempt` effect reports (times from its clock, ms since epoch). */
export interface AttemptResult {
  startedAt: number;
  endedAt: number;
  /** The HTTP status, or null when there was no answer. */
  status: number | null;
  error: AttemptErrorKind | null;
  /** A short machine-readable detail (an errno code such as `ECONNREFUSED`), or null. */
  detail: string | null;
  /** The receiver's `Retry-After`, in ms from `endedAt`, or null. */
  retryAfterMs: number | null;
}

/** One attempt as the delivery log shows it. */
export interface AttemptRecord {
  /** 1 for the first series; `REDELIVER` starts the next. */
  series: number;
  /** 1-based within its series. */
  n: number;
  startedAt: number;
  endedAt: number;
  status: number | null;
  error: AttemptErrorKind | 'effect_failed' | null;
  detail: string | null;
  /** When the next attempt is due, or null when this one was the last of its series. */
  nextAt: number | null;
}

/** What the delivery carries, fixed by `DELIVER`. */
export interface DeliverySpec {
  endpointId: string;
  accountId: string;
  projectId: string | null;
  eventId: string;
  eventType: string;
  /** The raw JSON body: every attempt sends these bytes. */
  body: string;
  createdAt: number;
}

export interface DeliveryInput {
  id: string;
  /**
   * When each attempt of a series is due, in ms from the series' start (the first usually 0: at once); its length
   * is the attempts per series. Offsets, not gaps: "at 0, 1 min, 5 min, 15 min, 1 h and 4 h" (addendum).
   */
  schedule: number[];
  /** The longest `Retry-After` honoured, in ms. */
  maxRetryAfterMs: number;
  /**
   * How long an attempt may be in flight before the watchdog wakes the actor (longer than any attempt can
   * take: `timeout_ms` is at most 30 s). It matters only after a crash during an attempt: its deadline in the
   * stored snapshot is what makes the host wake the actor on another worker and make the attempt again.
   */
  attemptWatchdogMs: number;
}

export interface DeliveryContext extends DeliveryInput {
  delivery: DeliverySpec | null;
  series: number;
  /** When the current series started (the event's delivery, or its redelivery). */
  seriesAt: number;
  /** Attempts made in the current series. */
  attempt: number;
  /** Every attempt, oldest first, at most `MAX_KEPT_ATTEMPTS` (the oldest dropped first). */
  attempts: AttemptRecord[];
  /** Attempts made in all, dropped ones included. */
  attemptCount: number;
  /** When the next attempt is due (`waiting`), or null. */
  nextAt: number | null;
  /** The attempt watchdog's deadline (`attempting`). */
  watchdogAt: number | null;
}

/** The attempts a delivery's log keeps. */
export const MAX_KEPT_ATTEMPTS = 50;

/** What the `attempt` effect is given: the delivery as `DELIVER` fixed it, and which attempt this is. */
export interface AttemptInput extends Omit<DeliverySpec, 'createdAt'> {
  deliveryId: string;
  series: number;
  n: number;
}

export type DeliveryEvent =
  | {
      type: 'DELIVER';
      endpoint_id: string;
      account_id: string;
      project_id: string | null;
      event_id: string;
      event_type: string;
      body: string;
      at: number;
    }
  | { type: 'REDELIVER'; at: number };

/** Domain events the machine emits (journaled with the step). */
export type DeliveryEmitted =
  | { type: 'delivery.attempted'; data: DeliveryEventData & { series: number; attempt: number; status: number | null; error: string | null; duration_ms: number; next_attempt_at: number | null } }
  | { type: 'delivery.succeeded'; data: DeliveryEventData & { attempts: number } }
  | { type: 'delivery.failed'; data: DeliveryEventData & { attempts: number } }
  | { type: 'delivery.redelivered'; data: DeliveryEventData & { series: number } };

interface DeliveryEventData {
  account_id: string;
  project_id: string | null;
  delivery_id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
}

/** Whether an attempt's answer was a success. */
export const succeeded = (r: AttemptResult): boolean => r.status !== null && r.status >= 200 && r.status < 300;

/** Whether a failed attempt may be retried: timeouts, network errors, 408, 429, 5xx. */
export const retryable = (r: AttemptResult): boolean =>
  r.status === null ? r.error === 'timeout' || r.error === 'network' : r.status === 408 || r.status === 429 || r.status >= 500;

const data = (c: DeliveryContext): DeliveryEventData => ({
  account_id: c.delivery!.accountId,
  project_id: c.delivery!.projectId,
  delivery_id: c.id,
  endpoint_id: c.delivery!.endpointId,
  event_id: c.delivery!.eventId,
  event_type: c.delivery!.eventType,
});

/** The next attempt's deadline after a failed one, or null when the series is over. */
function nextDeadline(c: DeliveryContext, r: AttemptResult): number | null {
  if (succeeded(r) || !retryable(r) || c.attempt + 1 >= c.schedule.length) return null;
  const asked = r.retryAfterMs === null ? 0 : Math.min(Math.max(0, r.retryAfterMs), c.maxRetryAfterMs);
  // Never before the failed attempt ended (`asked` is 0 or more).
  return Math.max(c.seriesAt + c.schedule[c.attempt + 1], r.endedAt + asked);
}

const keep = (attempts: AttemptRecord[], record: AttemptRecord) => [...attempts, record].slice(-MAX_KEPT_ATTEMPTS);

export const deliveryMachine = setup({
  types: {} as { context: DeliveryContext; events: DeliveryEvent; input: DeliveryInput; emitted: DeliveryEmitted },
  actors: {
    // Provided by the actor host (actors/delivery): a machine does no I/O of its own.
    attempt: fromPromise<AttemptResult, AttemptInput>(async () => {
      throw new Error('attempt is provided by the actor host');
    }),
    sleepUntil: fromPromise<number, { until: number }>(async () => {
      throw new Error('sleepUntil is provided by the actor host');
    }),
  },
  guards: {
    succeeded: (_, r: AttemptResult) => succeeded(r),
    retryLater: ({ context }, r: AttemptResult) => nextDeadline(context, r) !== null,
  },
  actions: {
    newSeries: assign({
      series: ({ context }) => context.series + 1,
      seriesAt: (_, p: { at: number }) => p.at,
      attempt: 0,
      nextAt: ({ context }, p: { at: number }) => p.at + context.schedule[0],
    }),
    emitRedelivered: emit(({ context }) => ({ type: 'delivery.redelivered' as const, data: { series: context.series, ...data(context) } })),
    record: assign(({ context }, r: AttemptResult) => {
      const nextAt = nextDeadline(context, r);
      return {
        attempt: context.attempt + 1,
        attemptCount: context.attemptCount + 1,
        nextAt,
        attempts: keep(context.attempts, {
          series: context.series,
          n: context.attempt + 1,
          startedAt: r.startedAt,
          endedAt: r.endedAt,
          status: r.status,
          error: r.error,
          detail: r.detail,
          nextAt,
        }),
      };
    }),
    emitAttempted: emit(({ context }) => {
      const last = context.attempts[context.attempts.length - 1];
      return {
        type: 'delivery.attempted' as const,
        data: { series: last.series, attempt: last.n, status: last.status, error: last.error, duration_ms: last.endedAt - last.startedAt, next_attempt_at: last.nextAt, ...data(context) },
      };
    }),
    emitSucceeded: emit(({ context }) => ({ type: 'delivery.succeeded' as const, data: { attempts: context.attempt, ...data(context) } })),
    emitFailed: emit(({ context }) => ({ type: 'delivery.failed' as const, data: { attempts: context.attempt, ...data(context) } })),
  },
}).createMachine({
  id: 'delivery',
  context: ({ input }) => ({ delivery: null, series: 0, seriesAt: 0, attempt: 0, attempts: [], attemptCount: 0, nextAt: null, watchdogAt: null, ...input }),
  initial: 'new',
  states: {
    new: {
      on: {
        DELIVER: {
          target: 'scheduling',
          actions: assign(({ event, context }) => ({
            delivery: {
              endpointId: event.endpoint_id,
              accountId: event.account_id,
              projectId: event.project_id,
              eventId: event.event_id,
              eventType: event.event_type,
              body: event.body,
              createdAt: event.at,
            },
            series: 1,
            seriesAt: event.at,
            attempt: 0,
            nextAt: event.at + context.schedule[0],
          })),
        },
      },
    },
    // A first attempt due at once (the schedule's first offset is 0) starts in the same step, without a timer:
    // one durable step fewer per delivery.
    scheduling: {
      always: [
        { guard: ({ context }) => context.schedule[0] === 0, target: 'attempting', actions: assign({ watchdogAt: ({ context }) => context.nextAt! + context.attemptWatchdogMs }) },
        { target: 'waiting' },
      ],
    },
    waiting: {
      tags: ['pending'],
      invoke: {
        id: 'backoff',
        src: 'sleepUntil',
        input: ({ context }) => ({ until: context.nextAt! }),
        // The timer's output is when it fired: the watchdog counts from then.
        onDone: { target: 'attempting', actions: assign({ watchdogAt: ({ context, event }) => event.output + context.attemptWatchdogMs }) },
      },
    },
    attempting: {
      tags: ['pending', 'attempting'],
      // A durable deadline while the attempt is in flight. Alive, it never fires (an attempt ends well before);
      // after a crash it is the stored deadline that wakes the actor elsewhere, where the attempt is made again
      // (an invoked effect restarts on restore), and it re-arms from the time it fired.
      initial: 'watched',
      states: {
        watched: {
          invoke: {
            id: 'watchdog',
            src: 'sleepUntil',
            input: ({ context }) => ({ until: context.watchdogAt! }),
            onDone: { target: 'watched', reenter: true, actions: assign({ watchdogAt: ({ context, event }) => event.output + context.attemptWatchdogMs }) },
          },
        },
      },
      invoke: {
        id: 'attempt',
        src: 'attempt',
        input: ({ context }): AttemptInput => ({
          deliveryId: context.id,
          endpointId: context.delivery!.endpointId,
          accountId: context.delivery!.accountId,
          projectId: context.delivery!.projectId,
          eventId: context.delivery!.eventId,
          eventType: context.delivery!.eventType,
          body: context.delivery!.body,
          series: context.series,
          n: context.attempt + 1,
        }),
        onDone: [
          {
            guard: { type: 'succeeded', params: ({ event }) => event.output },
            target: 'delivered',
            actions: [{ type: 'record', params: ({ event }) => event.output }, 'emitAttempted', 'emitSucceeded'],
          },
          {
            guard: { type: 'retryLater', params: ({ event }) => event.output },
            target: 'waiting',
            actions: [{ type: 'record', params: ({ event }) => event.output }, 'emitAttempted'],
          },
          { target: 'failed', actions: [{ type: 'record', params: ({ event }) => event.output }, 'emitAttempted', 'emitFailed'] },
        ],
        // The effect reports every failure it knows as a result; a throw is a fault of ours, recorded and
        // retried at the schedule's next offset, not before the failed attempt was due (the machine has no
        // clock of its own: when the throw came is not known).
        onError: [
          {
            guard: ({ context }) => context.attempt + 1 < context.schedule.length,
            target: 'waiting',
            actions: assign(({ context }) => {
              const at = context.nextAt ?? 0;
              const nextAt = Math.max(at, context.seriesAt + context.schedule[context.attempt + 1]);
              return {
                attempt: context.attempt + 1,
                attemptCount: context.attemptCount + 1,
                nextAt,
                attempts: keep(context.attempts, { series: context.series, n: context.attempt + 1, startedAt: at, endedAt: at, status: null, error: 'effect_failed' as const, detail: null, nextAt }),
              };
            }),
          },
          {
            target: 'failed',
            actions: [
              assign(({ context }) => {
                const at = context.nextAt ?? 0;
                return {
                  attempt: context.attempt + 1,
                  attemptCount: context.attemptCount + 1,
                  nextAt: null,
                  attempts: keep(context.attempts, { series: context.series, n: context.attempt + 1, startedAt: at, endedAt: at, status: null, error: 'effect_failed' as const, detail: null, nextAt: null }),
                };
              }),
              'emitFailed',
            ],
          },
        ],
      },
    },
    delivered: { tags: ['done', 'delivered'] },
    failed: { tags: ['done', 'failed'] },
  },
  on: {
    REDELIVER: {
      // Not before the first DELIVER: there is nothing to send yet.
      guard: ({ context }) => context.delivery !== null,
      target: '.scheduling',
      reenter: true,
      actions: [{ type: 'newSeries', params: ({ event }) => ({ at: event.at }) }, 'emitRedelivered'],
    },
  },
});
