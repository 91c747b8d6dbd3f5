import { createHash } from 'node:crypto';

/** Webhook endpoint ids: `whe_` and base62 (addendum, "Alert webhooks"). */
export const ENDPOINT_ID = /^whe_[A-Za-z0-9]+$/;
/** Delivery ids: `whd_` and 32 hex digits, derived from endpoint and event (`deliveryId`). */
export const DELIVERY_ID = /^whd_[A-Za-z0-9]+$/;
/**
 * Event ids travel in `X-Service-Event-ID` and `webhook-id`, so they are kept to characters every HTTP stack
 * carries unchanged in a header value.
 */
export const EVENT_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The delivery of one event to one endpoint. Derived, not drawn: the same endpoint and event always name
 * the same delivery actor, so a caller that dispatches an event again (after a crash, a timeout, a
 * failover) reaches the actor that already holds it instead of starting a second delivery.
 */
export function deliveryId(endpointId: string, eventId: string): string {
  return `whd_${createHash('sha256').update(`${endpointId}\n${eventId}`, 'utf8').digest('hex').slice(0, 32)}`;
}
