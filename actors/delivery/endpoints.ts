import type { Collection, Doc, Store } from '../../store/mod.js';

/** The event types an endpoint may subscribe to (spec 2.4). `webhook.test` is sent on request only. */
export const EVENT_TYPES = ['alerts.triggered', 'alerts.resolved'] as const;
export type SubscribableEventType = (typeof EVENT_TYPES)[number];
/** Every event type a delivery can carry. */
export type WebhookEventType = SubscribableEventType | 'webhook.test';

/** The signing secret as stored: AES-256-GCM under the data dir's key (`secret-box.ts`). */
export interface SealedSecret {
  iv: string;
  tag: string;
  data: string;
}

/** A webhook endpoint as stored (`webhook_endpoints`). */
export interface WebhookEndpointRecord extends Doc {
  id: string;
  account_id: string;
  /**
   * 0 to limit-1, unique per account: the per-account limit holds across processes because a second
   * create that picks a taken slot is refused by the unique index, not by a count read before the write.
   */
  slot: number;
  name: string;
  url: string;
  event_types: SubscribableEventType[];
  headers: Record<string, string>;
  timeout_ms: number;
  enabled: boolean;
  secret: SealedSecret;
  created_at: string;
  updated_at: string;
}

/** The `webhook_endpoints` collection. */
export function webhookEndpoints(store: Store): Collection<WebhookEndpointRecord> {
  return store.collection<WebhookEndpointRecord>({
    name: 'webhook_endpoints',
    indexes: [{ fields: ['account_id', 'slot'], unique: true }, { fields: ['account_id', 'created_at'] }],
  });
}

/** The account's enabled endpoints that subscribe to `type` (`webhook.test` goes to no one unasked). */
export async function subscribedEndpoints(store: Store, accountId: string, type: WebhookEventType): Promise<WebhookEndpointRecord[]> {
  // An endpoint created or enabled a moment ago, by another thread or process, is subscribed already.
  store.refresh();
  const all = await webhookEndpoints(store).find({ account_id: accountId, enabled: true });
  return all.filter((e) => (e.event_types as string[]).includes(type));
}
