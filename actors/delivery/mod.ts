/**
 * The `delivery` actor kind's public module (signed webhook deliveries): what the rest of the platform may
 * use of it. Gateways, `platform/` and `bin/` import this file, never the files beside it
 * (`test/architecture.test.ts` checks).
 *
 * - Dispatch: `dispatchWebhookEvent` (an event to the account's subscribed endpoints; what the alert rules
 *   call), `dispatchToEndpoint` (the test event).
 * - Endpoints: the `webhook_endpoints` collection and its record; URL checks (`checkDestination`); signing
 *   secrets (`newSigningSecret`, sealed at rest by `SecretBox`).
 * - The kind, for the worker that hosts it: `deliveryKind`.
 * - Read model: the delivery log (`webhookDeliveries`), written from the actors' snapshots.
 *
 * @module
 */
export { dispatchWebhookEvent, dispatchToEndpoint, DELIVERY_KIND, MAX_BODY_BYTES, type DispatchDeps, type Dispatched, type WebhookEvent, type DeliverEvent } from './dispatch.js';
export { EVENT_TYPES, subscribedEndpoints, webhookEndpoints, type SubscribableEventType, type WebhookEventType, type WebhookEndpointRecord, type SealedSecret } from './endpoints.js';
export { deliveryId, DELIVERY_ID, ENDPOINT_ID, EVENT_ID } from './ids.js';
export { deliveryKind, DEFAULT_RETRY_SCHEDULE_MS, DEFAULT_MAX_RETRY_AFTER_MS, type DeliveryKindDeps, type DeliveryReply } from './kind.js';
export { deleteEndpointLog, startDeliveryLogSweeps, sweepDeliveryLog, WEBHOOK_DELIVERY_RETENTION_MS } from './log-sweep.js';
export { webhookDeliveries, type DeliveryRecord, type DeliveryStatus, type AttemptView } from './deliveries.js';
export { SecretBox } from './secret-box.js';
export { newSigningSecret, signatureHeaders, SECRET_PREFIX, type SignatureHeaders } from './signature.js';
export { checkDestination, parseWebhookUrl, MAX_URL_LENGTH, type DestinationProblem } from './destination.js';
export { isBlockedAddress } from './address.js';
export { USER_AGENT } from './attempt.js';
