import type { Collection, Doc, Store } from '../../store/mod.js';
import type { DeliveryContext } from '../../machines/delivery.js';

/** A delivery's status as the log shows it. */
export type DeliveryStatus = 'pending' | 'delivering' | 'succeeded' | 'failed';

/** One attempt in the delivery log. */
export interface AttemptView {
  /** 1 for the first series of attempts; each redelivery starts the next. */
  series: number;
  /** 1-based within its series. */
  attempt: number;
  started_at: string;
  ended_at: string;
  duration_ms: number;
  /** The receiver's HTTP status, or null when there was none. */
  response_status: number | null;
  /** Why there was no usable answer: `timeout`, `network`, `private_address`, `endpoint_deleted`, `endpoint_disabled`, `effect_failed`; null otherwise. */
  error: string | null;
  /** A detail of the error, such as `ECONNREFUSED`, or null. */
  error_detail: string | null;
  /** When the next attempt was scheduled after this one, or null. */
  next_attempt_at: string | null;
}

/** A delivery as stored (`webhook_deliveries`) and listed by the delivery log. */
export interface DeliveryRecord extends Doc {
  id: string;
  account_id: string;
  project_id: string | null;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  created_at: string;
  updated_at: string;
  next_attempt_at: string | null;
  /** Attempts made in all (the log keeps the newest 50). */
  attempt_count: number;
  attempts: AttemptView[];
  /** The actor snapshot version this record was written from: an older one never overwrites it. */
  snapshot_version: number;
}

/** The `webhook_deliveries` collection: the delivery log, written from the delivery actors' snapshots. */
export function webhookDeliveries(store: Store): Collection<DeliveryRecord> {
  return store.collection<DeliveryRecord>({ name: 'webhook_deliveries', indexes: [{ fields: ['endpoint_id', 'created_at'] }, { fields: ['account_id'] }] });
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The log record of a delivery actor's state (`status` from the machine's state tags). */
export function toDeliveryRecord(id: string, status: DeliveryStatus, c: DeliveryContext, version: number, updatedAt: number): DeliveryRecord | null {
  const d = c.delivery;
  if (!d) return null;
  return {
    id,
    account_id: d.accountId,
    project_id: d.projectId,
    endpoint_id: d.endpointId,
    event_id: d.eventId,
    event_type: d.eventType,
    status,
    created_at: iso(d.createdAt),
    updated_at: iso(updatedAt),
    next_attempt_at: status === 'pending' && c.nextAt !== null ? iso(c.nextAt) : null,
    attempt_count: c.attemptCount,
    attempts: c.attempts.map((a) => ({
      series: a.series,
      attempt: a.n,
      started_at: iso(a.startedAt),
      ended_at: iso(a.endedAt),
      duration_ms: a.endedAt - a.startedAt,
      response_status: a.status,
      error: a.error,
      error_detail: a.detail,
      next_attempt_at: a.nextAt === null ? null : iso(a.nextAt),
    })),
    snapshot_version: version,
  };
}
