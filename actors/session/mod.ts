/**
 * The `session` actor kind's public module (Messaging API sessions): what the rest of the platform may use
 * of it. Gateways, `platform/` and `bin/` import this file, never the files beside it
 * (`test/architecture.test.ts` checks).
 *
 * - The kind, for the worker that hosts it: `sessionKind`.
 * - Subscription: the per-session topic (`sessionTopic`) whose messages are `Published` batches (msgpack,
 *   decoded with `decode` from `actors/mod.ts`).
 * - Read models: the journal of wire events (replay) and the session records (`messaging_sessions`).
 * - The wire envelope: `WireEvent`, and the events a gateway writes itself (`gatewayEvent`, `systemMessage`).
 *
 * @module
 */
export { sessionKind, sessionTopic, type Published } from './kind.js';
export { Journal, type JournalEntry } from './journal.js';
export { sessionRecords, type SessionRecord } from './record.js';
export { EVENT_PREFIX, gatewayEvent, systemMessage, type WireEvent } from './wire.js';
