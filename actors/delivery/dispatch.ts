import type { ActorClient } from '../client.js';
import type { Store } from '../../store/mod.js';
import { subscribedEndpoints, type WebhookEndpointRecord, type WebhookEventType } from './endpoints.js';
import { deliveryId, EVENT_ID } from './ids.js';

/** The actor kind of a delivery: one actor per (endpoint, event). */
export const DELIVERY_KIND = 'delivery';

/** The largest event body a delivery carries (its JSON, in bytes). */
export const MAX_BODY_BYTES = 256 * 1024;

/** What `dispatchWebhookEvent` needs: the store (to find endpoints) and a client to reach delivery actors. */
export interface DispatchDeps {
  store: Store;
  client: Pick<ActorClient, 'ask'>;
}

/** One event to send to the account's endpoints. */
export interface WebhookEvent {
  /**
   * Stable id of the event: sent as `X-Service-Event-ID` and `webhook-id`, and the key of its deliveries.
   * Dispatching the same id again starts nothing new, so a caller that retries never sends twice.
   * `[A-Za-z0-9._:-]{1,128}`.
   */
  id: string;
  type: WebhookEventType;
  account_id: string;
  project_id: string | null;
  /** The JSON body (e.g. `{event_type, alert}`); serialized once, so every attempt sends the same bytes. */
  body: object;
}

/** One delivery started (or found already started) by a dispatch. */
export interface Dispatched {
  endpoint_id: string;
  delivery_id: string;
}

/** The `DELIVER` event a delivery actor starts from (see `machines/delivery.ts`). */
export interface DeliverEvent {
  type: 'DELIVER';
  endpoint_id: string;
  account_id: string;
  project_id: string | null;
  event_id: string;
  event_type: WebhookEventType;
  body: string;
  at: number;
  [key: string]: unknown;
}

/**
 * Sends `event` to every enabled endpoint of its account that subscribes to its type: one delivery actor per
 * endpoint (`deliveryId(endpoint, event)`), started by an ask with an event id derived from the delivery, so
 * the actor applies it once however often it is dispatched. Resolves once every delivery is durably started
 * (not delivered: attempts and retries are the actor's). Throws `TypeError` for a malformed id or body.
 */
export async function dispatchWebhookEvent(deps: DispatchDeps, event: WebhookEvent): Promise<Dispatched[]> {
  const body = serialize(event);
  const endpoints = await subscribedEndpoints(deps.store, event.account_id, event.type);
  return Promise.all(endpoints.map((e) => start(deps, e, event, body)));
}

/**
 * Sends `event` to one endpoint of its account, whatever it subscribes to (the test event). The endpoint must
 * belong to `event.account_id`.
 */
export async function dispatchToEndpoint(deps: DispatchDeps, endpoint: WebhookEndpointRecord, event: WebhookEvent): Promise<Dispatched> {
  if (endpoint.account_id !== event.account_id) throw new TypeError('the endpoint belongs to another account');
  return start(deps, endpoint, event, serialize(event));
}

function serialize(event: WebhookEvent): string {
  if (typeof event.id !== 'string' || !EVENT_ID.test(event.id)) throw new TypeError(`webhook event id must match ${EVENT_ID}`);
  const body = JSON.stringify(event.body);
  if (typeof body !== 'string' || event.body === null || typeof event.body !== 'object') throw new TypeError('webhook event body must be a JSON object');
  if (Buffer.byteLength(body) > MAX_BODY_BYTES) throw new TypeError(`webhook event body over ${MAX_BODY_BYTES} bytes`);
  return body;
}

async function start(deps: DispatchDeps, endpoint: WebhookEndpointRecord, event: WebhookEvent, body: string): Promise<Dispatched> {
  const id = deliveryId(endpoint.id, event.id);
  const deliver: DeliverEvent = {
    type: 'DELIVER',
    endpoint_id: endpoint.id,
    account_id: event.account_id,
    project_id: event.project_id,
    event_id: event.id,
    event_type: event.type,
    body,
    at: Date.now(),
  };
  await deps.client.ask(DELIVERY_KIND, id, deliver, { eventId: `deliver:${id}` });
  return { endpoint_id: endpoint.id, delivery_id: id };
}
