/**
 * The `call` actor kind's public module (outbound calls, one actor per `call_sid`): what the rest of the
 * platform may use of it. Gateways, `platform/` and `bin/` import this file, never the files beside it.
 *
 * - The media protocol: `MEDIA_DIAL_SUBJECT` with `DialRequest`/`DialResult` (the call actor asks a media
 *   gateway to place a call) and `CALL_ENDED` (the media gateway tells the call actor an answered call hung up).
 *
 * @module
 */
export {
  CALL_ENCRYPTIONS,
  CALL_KIND,
  DEFAULT_CALL_ENCRYPTION,
  MEDIA_DIAL_QUEUE,
  MEDIA_DIAL_SUBJECT,
  callEndedEvent,
  type CallEncryption,
  type CallEndedEvent,
  type DialOutcome,
  type DialRequest,
  type DialResult,
  type DialTrunk,
} from './protocol.js';
export { callKind, reasonOf, type CallDeps, type CallReply } from './kind.js';
export { outboundCallRecords, type OutboundCallRecord } from './record.js';
export type { CallRequest } from '../../machines/call.js';
