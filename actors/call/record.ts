import type { Collection, Doc, Store } from '../../store/mod.js';

/**
 * What `GET /v1/outbound-calling/{call_sid}/status` reads without asking the call actor (so an unknown
 * call_sid creates no actor): written by the call kind with every settled snapshot, tagged with the
 * snapshot version so an older one never wins. `status` `expired` (after the retention timer) reads as 404,
 * and so does any record past `retain_until`.
 */
export interface OutboundCallRecord extends Doc {
  account_id: string;
  project_id: string;
  /** The admin connector (kind `outbound`) whose token placed the call. */
  connector_id: string;
  telephony_connector_id: string;
  status: 'queued' | 'calling' | 'success' | 'failure' | 'expired';
  reason: string;
  to_number: string;
  from_number: string;
  sip_status: number | null;
  conversation_id: string | null;
  queued_at: string;
  ended_at: string | null;
  /** ms since epoch after which the status is gone; null while the call has not ended. */
  retain_until: number | null;
  snapshot_version: number;
}

export const outboundCallRecords = (store: Store): Collection<OutboundCallRecord> =>
  store.collection<OutboundCallRecord>({ name: 'outbound_calls', indexes: [{ fields: ['account_id', 'project_id'] }] });
