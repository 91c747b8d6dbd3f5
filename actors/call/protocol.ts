/**
 * The protocol between the call actor (which decides when an outbound call is placed) and a media gateway
 * (which places it): one request on the transport per dial, msgpack-encoded with `encode`/`decode` of
 * `actors/mod.ts`, answered once the call is answered or has failed; and one ask back to the call actor when
 * an answered call hangs up.
 */
import type { TransferMode } from '../../builder/mod.js';
import type { Environment } from '../../tenancy/connectors.js';

/** Subject a media gateway subscribes to (queue group `media`) to place outbound calls. */
export const MEDIA_DIAL_SUBJECT = 'sb.media.dial';
/** Queue group of the media gateways on `MEDIA_DIAL_SUBJECT`: each dial reaches one of them. */
export const MEDIA_DIAL_QUEUE = 'media';

/** The actor kind of outbound calls; an actor's id is its `call_sid`. */
export const CALL_KIND = 'call';

/** The four media encryptions of contract 4.5 (signalling transport / media protocol). */
export const CALL_ENCRYPTIONS = ['TLS/SRTP', 'TLS/RTP', 'UDP/SRTP', 'UDP/RTP'] as const;
export type CallEncryption = (typeof CALL_ENCRYPTIONS)[number];
export const DEFAULT_CALL_ENCRYPTION: CallEncryption = 'TLS/SRTP';

/** Where and how to reach the SIP trunk a call goes through. */
export interface DialTrunk {
  host: string;
  port: number;
  transport: 'udp' | 'tcp' | 'tls';
  username?: string;
  password?: string;
  /** How the call is handed on at a handoff: a REFER, or a bridged call the gateway places through this trunk. */
  transfer: TransferMode;
}

/**
 * Asks a media gateway to place one outbound call. Idempotent by `call_sid`: a gateway that gets the same
 * call_sid again (the call actor re-sends after a worker failover) answers with the outcome of the call it
 * already placed, or joins the attempt in progress, and never dials twice.
 */
export interface DialRequest {
  call_sid: string;
  account_id: string;
  project_id: string;
  environment: Environment;
  variant_id: string | null;
  /** E.164. */
  to: string;
  /** E.164: the outbound connector's `from_number`. */
  from: string;
  /** The trigger's `metadata`: each key sent as a SIP header on the INVITE, readable as `conv.sip_headers`. */
  headers: Record<string, string>;
  encryption: CallEncryption;
  trunk: DialTrunk;
  /** How long the far end may ring before the call counts as unanswered (ms). */
  ring_timeout_ms: number;
}

export type DialOutcome = 'answered' | 'busy' | 'no_answer' | 'rejected' | 'unreachable' | 'trunk_unusable' | 'error';

/**
 * A media gateway's answer, sent once the call is answered (connected: media chosen, its conversation's start
 * and opening then run on) or has failed.
 */
export interface DialResult {
  outcome: DialOutcome;
  /** The final SIP status (200, 486, 603, 408 …), null when no response came (unreachable, error). */
  sip_status: number | null;
  /** Why, in words (e.g. `486 Busy Here`); empty when answered. */
  reason: string;
  /** The VOICE-SIP conversation an answered call starts; null otherwise. */
  conversation_id: string | null;
}

/**
 * The event a media gateway asks the call actor (`kind` `CALL_KIND`, id the call_sid) when an answered call
 * hangs up, by either side: it fixes the end time from which the status is kept about 2 hours. Idempotent:
 * a call ends once; later ones change nothing. Only an answered call hangs up (a far end that gives up before
 * the answer ends the INVITE, which the dial's result reports), so the event carries what the dial's answer
 * did: a hang-up that reaches a call still `calling` (the answer was lost with the worker that asked) settles
 * the call with them.
 */
export interface CallEndedEvent {
  type: 'CALL_ENDED';
  /** When the call ended (ms since epoch). */
  at: number;
  /** The VOICE-SIP conversation the call ran (a media gateway of an older version sends none). */
  conversation_id?: string;
  /** The SIP status of the answer: 200. */
  sip_status?: number;
  [key: string]: unknown;
}

export const callEndedEvent = (at: number, conversationId: string, sipStatus: number): CallEndedEvent => ({ type: 'CALL_ENDED', at, conversation_id: conversationId, sip_status: sipStatus });
