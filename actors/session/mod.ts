/**
 * The `session` actor kind's public module (Messaging API sessions): what the rest of the platform may use
 * of it. Gateways, `platform/` and `bin/` import this file, never the files beside it
 * (`test/architecture.test.ts` checks).
 *
 * - The kind, for the worker that hosts it: `sessionKind`.
 * - Subscription: the per-session topic (`sessionTopic`) whose messages are `Published` frames of one
 *   committed step (msgpack, decoded with `decode` from `actors/mod.ts`).
 * - History: `sessionHistory` reads a session's frames and owner from the actor journal (replay, desk); the
 *   owner also tells a session's conversation from others (the Chat API refuses it).
 * - Read model: the session records (`messaging_sessions`), projected by `sessionRecordsProjector`.
 * - The wire module: frames, answers, the contract's messages (`SESSION_ERRORS`), and the events a gateway
 *   writes itself (`gatewayEvent`, `systemMessage`).
 *
 * @module
 */
export { sessionKind, sessionTopic, type Published } from './kind.js';
export { sessionHistory, sessionKey, type SessionHistory, type SessionOwner } from './history.js';
export { sessionRecords, type SessionRecord } from './record.js';
export { sessionRecordsProjector } from './projector.js';
export {
  EVENT_PREFIX,
  MAX_MESSAGE_BYTES,
  SERVER_EVENT_TYPES,
  SESSION_ERRORS,
  gatewayEvent,
  systemMessage,
  type Frame,
  type SessionReply,
  type WireEvent,
} from './wire.js';
