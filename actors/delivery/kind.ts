import { deliveryMachine } from '../../machines/delivery.js';
import type { ActorKind } from '../kinds.js';
import { fromTask } from '../task.js';
import { sleepUntil } from '../timers.js';
import { attemptEffect, type AttemptDeps } from './attempt.js';
import { toDeliveryRecord, webhookDeliveries, type DeliveryStatus } from './deliveries.js';
import { DELIVERY_KIND } from './dispatch.js';

/** The retry schedule of the addendum: attempts at 0, 1 min, 5 min, 15 min, 1 h and 4 h (each a delay after the last failure). */
export const DEFAULT_RETRY_SCHEDULE_MS = [0, 60_000, 300_000, 900_000, 3_600_000, 14_400_000];
/** The longest `Retry-After` honoured: a day. */
export const DEFAULT_MAX_RETRY_AFTER_MS = 86_400_000;
/** An attempt in flight longer than this (never, alive: `timeout_ms` is at most 30 s) is made again. */
export const DEFAULT_ATTEMPT_WATCHDOG_MS = 120_000;

export interface DeliveryKindDeps extends AttemptDeps {
  /** `WEBHOOK_RETRY_SCHEDULE_MS`: when each attempt of a series is due, in ms from the series' start. */
  schedule?: number[];
  maxRetryAfterMs?: number;
  attemptWatchdogMs?: number;
}

/** What an ask of a delivery answers. */
export interface DeliveryReply {
  status: DeliveryStatus;
  series: number;
}

/** The log's status of a delivery actor's snapshot, from its state tags. */
const statusOf = (s: { hasTag(tag: string): boolean }): DeliveryStatus =>
  s.hasTag('delivered') ? 'succeeded' : s.hasTag('failed') ? 'failed' : s.hasTag('attempting') ? 'delivering' : 'pending';

/**
 * The `delivery` actor kind: the delivery machine with its `attempt` effect (signed HTTP POST) and durable
 * timers, answering asks at once (a `DELIVER` is durable before the first attempt, which runs after), and
 * writing the delivery log record from every snapshot.
 */
export function deliveryKind(deps: DeliveryKindDeps): ActorKind {
  const schedule = deps.schedule ?? DEFAULT_RETRY_SCHEDULE_MS;
  const maxRetryAfterMs = deps.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
  const attemptWatchdogMs = deps.attemptWatchdogMs ?? DEFAULT_ATTEMPT_WATCHDOG_MS;
  const log = webhookDeliveries(deps.store);
  const now = deps.now ?? Date.now;
  const machine = deliveryMachine.provide({ actors: { attempt: fromTask(attemptEffect(deps)), sleepUntil } });
  return {
    name: DELIVERY_KIND,
    machine,
    input: (id) => ({ id, schedule, maxRetryAfterMs, attemptWatchdogMs }),
    reply: (s): DeliveryReply => ({ status: statusOf(s), series: s.context.series }),
    project: async (s, id, version) => {
      const record = toDeliveryRecord(id, statusOf(s), s.context, version, now());
      if (record) await log.putNewer(record, 'snapshot_version');
    },
  };
}
