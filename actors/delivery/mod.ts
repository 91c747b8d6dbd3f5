/**
 * The `delivery` actor kind's public module (signed webhook deliveries): what the rest of the platform may
 * use of it. Gateways, `platform/` and `bin/` import this file, never the files beside it
 * (`test/architecture.test.ts` checks).
 *
 * - Dispatch: `dispatchWebhookEvent` (an event to the account's subscribed endpoints; what the alert rules
 *   call), `dispatchToEndpoint` (the test event).
 * - Endpoints: the `webhook_endpoints` collection and its record.
 *
 * @module
 */
export { dispatchWebhookEvent, dispatchToEndpoint, DELIVERY_KIND, MAX_BODY_BYTES, type DispatchDeps, type Dispatched, type WebhookEvent, type DeliverEvent } from './dispatch.js';
export { EVENT_TYPES, subscribedEndpoints, webhookEndpoints, type SubscribableEventType, type WebhookEventType, type WebhookEndpointRecord, type SealedSecret } from './endpoints.js';
export { deliveryId, DELIVERY_ID, ENDPOINT_ID, EVENT_ID } from './ids.js';
