import { hash, randomUUID } from 'node:crypto';
import { MAX_CHUNKS, streamedParts, type Refusal, type SessionFailure } from '../../machines/session.js';

/**
 * The session kind's wire module: the Messaging API's frames (addendum "Envelope") rendered from what a
 * session step committed (its semantic `session.*` events), the answers to asks, and the user-facing
 * messages of contract 7.4. Live publication and journal replay both render here, from the same committed
 * entries, so a replayed frame is the frame that went out live.
 */

/**
 * The Messaging API's wire format of a server event: `id` (UUID), `sequence`, `timestamp` (ISO 8601),
 * `type` with its `EVENT_TYPE_` prefix, `payload` and `metadata` (with the client's `custom` echoed when
 * the event answers one that carried it).
 */
export interface WireEvent {
  id: string;
  sequence: number | null;
  timestamp: string;
  type: string;
  payload: Record<string, unknown>;
  metadata: { custom?: unknown };
}

/** A rendered frame: its sequence (null: transient) and its wire JSON. */
export interface Frame {
  s: number | null;
  j: string;
}

/** What the wire module reads of a committed step (a journal entry). */
export interface CommittedStep {
  version: number;
  at: number;
  events: Array<{ type: string; data?: Record<string, unknown> }>;
}

/** The answer to the last external event, which the host sends back to the asker. */
export type SessionReply =
  | { ok: true; duplicateOf?: number }
  | { ok: false; error: 'not_found' | 'limit' | 'exists' | 'not_waiting' | 'not_live' | 'not_agent'; message?: string };

export const EVENT_PREFIX = 'EVENT_TYPE_';

/** Largest client frame the gateway takes; announced in SESSION_START. */
export const MAX_MESSAGE_BYTES = 131_072;
/** Capabilities announced in SESSION_START (addendum). */
export const capabilities = (streaming: boolean) => ({
  streaming,
  max_message_size_bytes: MAX_MESSAGE_BYTES,
  max_reconnect_attempts: 5,
  heartbeat_interval_seconds: 30,
});

/** The messages of contract 7.4 that sessions raise. */
export const SESSION_ERRORS = {
  overload: 'Our system is experiencing high load. Please try again in a moment.',
  start: "Sorry, I'm unable to start a conversation right now. Please try again later.",
  respond: "Sorry, I'm having trouble responding right now. Please try again.",
  stream: 'Sorry, I encountered an error. Please try again.',
  sessionNotFound: 'Error: Session not found',
  conversationNotFound: 'Error: Conversation not found',
  conversationIdNotFound: 'Error: Conversation ID not found in session',
  handoffConnect: 'Sorry, we could not connect you to an agent. Please try again.',
  forward: 'Failed to forward message to live agent',
  handoffInit: 'Sorry, handoff could not be initiated.',
} as const;

const FAILURE_MESSAGES: Record<SessionFailure, string> = {
  overload: SESSION_ERRORS.overload,
  start: SESSION_ERRORS.start,
  respond: SESSION_ERRORS.respond,
  stream: SESSION_ERRORS.stream,
  handoff_connect: SESSION_ERRORS.handoffConnect,
  handoff_init: SESSION_ERRORS.handoffInit,
};

const REFUSALS: Record<Refusal, Extract<SessionReply, { ok: false }>> = {
  not_found: { ok: false, error: 'not_found' },
  session_not_found: { ok: false, error: 'not_found', message: SESSION_ERRORS.sessionNotFound },
  conversation_not_found: { ok: false, error: 'not_found', message: SESSION_ERRORS.conversationNotFound },
  conversation_id_not_found: { ok: false, error: 'not_found', message: SESSION_ERRORS.conversationIdNotFound },
  forward: { ok: false, error: 'not_found', message: SESSION_ERRORS.forward },
  limit: { ok: false, error: 'limit' },
  exists: { ok: false, error: 'exists' },
  not_waiting: { ok: false, error: 'not_waiting' },
  not_live: { ok: false, error: 'not_live' },
  not_agent: { ok: false, error: 'not_agent' },
};

/** Event types that never come from a client (answered with "Event type not allowed"). */
export const SERVER_EVENT_TYPES = [
  'SESSION_START', 'EVENT_BATCH', 'SERVICE_AGENT_JOINED', 'SERVICE_AGENT_THINKING', 'SERVICE_AGENT_MESSAGE',
  'SERVICE_AGENT_MESSAGE_CHUNK', 'SERVICE_AGENT_LEFT', 'SERVICE_AGENT_TRIGGERED_HANDOFF', 'HANDOFF_ACCEPTED',
  'HANDOFF_FAILED', 'HANDOFF_TIMEOUT', 'HANDOFF_QUEUE_STATUS', 'CLIENT_HANDOFF_REQUIRED', 'LIVE_AGENT_JOINED',
  'LIVE_AGENT_TYPING', 'LIVE_AGENT_MESSAGE', 'LIVE_AGENT_LEFT', 'LANGUAGE_CHANGED', 'SYSTEM_MESSAGE', 'SESSION_END',
] as const;

/**
 * A UUID derived from the session id and the event's place (name-based, in the manner of UUID v5): the
 * same frame gets the same id however often it is published or replayed, so clients can de-duplicate by
 * id after a retry or a failover.
 */
export function eventUuid(sessionId: string, place: string): string {
  // The one-shot hash: no Hash object per call (every frame a session publishes or replays is named here).
  const h = hash('sha1', `${sessionId}:${place}`, 'buffer');
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/**
 * Cuts a streamed reply into `streamedParts(text)` chunks of whole words (with their trailing spaces),
 * spread evenly; they concatenate to the text exactly.
 */
export function chunkText(text: string): string[] {
  const words = text.match(/\S+\s*/g) ?? [];
  if (!words.length) return [text];
  const n = streamedParts(text);
  const base = Math.floor(words.length / n);
  const extra = words.length % n;
  const chunks: string[] = [];
  for (let i = 0, w = 0; i < n; i++) {
    const size = base + (i < extra ? 1 : 0);
    chunks.push(words.slice(w, w + size).join(''));
    w += size;
  }
  // Leading spaces belong to the first chunk so that the chunks concatenate to the text exactly.
  chunks[0] = /^\s*/.exec(text)![0] + chunks[0];
  return chunks;
}
export { MAX_CHUNKS };

const messageId = (sessionId: string, seq: number) => `msg_${sessionId}_${seq}`;

type Data = Record<string, any>;
type Draft = { seq: number | null; type: string; payload: Record<string, unknown>; custom?: unknown };

/** The frames (before the envelope) of one semantic event; none for events clients do not see. */
function frames(sessionId: string, type: string, d: Data): Draft[] {
  const seq = typeof d.seq === 'number' ? d.seq : null;
  const one = (t: string, payload: Record<string, unknown> = {}, custom: unknown = null): Draft[] => [{ seq, type: t, payload, custom }];
  switch (type) {
    case 'session.started':
      return one('SESSION_START', { capabilities: capabilities(d.streaming === true) });
    case 'session.join_requested':
      return one('REQUEST_SERVICE_AGENT_JOIN', {}, d.custom);
    case 'session.heartbeat':
      return one('HEARTBEAT', {}, d.custom);
    case 'session.user_message':
      return one('USER_MESSAGE', { text: d.text, message_id: messageId(sessionId, seq!) }, d.custom);
    case 'session.user_ended':
      return one('USER_END_SESSION', {}, d.custom);
    case 'session.language_changed':
      return one('LANGUAGE_CHANGED', { language_code: d.language }, d.custom);
    case 'session.agent_joined':
      return one('SERVICE_AGENT_JOINED', { agent_name: d.agent_name, agent_avatar_url: d.agent_avatar_url }, d.custom);
    case 'session.thinking':
      return one('SERVICE_AGENT_THINKING', {}, d.custom);
    case 'session.agent_message': {
      const id = messageId(sessionId, seq!);
      const suggestions = (d.suggestions as string[]).map((s) => ({ message_text: s }));
      if (!d.streamed) return one('SERVICE_AGENT_MESSAGE', { message_id: id, text: d.text, attachments: [], response_suggestions: suggestions }, d.custom);
      const parts = chunkText(d.text as string);
      return parts.map((text, i) => ({
        seq: seq! + i,
        type: 'SERVICE_AGENT_MESSAGE_CHUNK',
        payload: {
          message_id: id,
          text,
          attachments: [],
          // Suggestions become known with the whole reply: they ride on the last chunk.
          response_suggestions: i === parts.length - 1 ? suggestions : [],
          chunk_index: i + 1,
          is_complete: i === parts.length - 1,
        },
        custom: d.custom,
      }));
    }
    case 'session.failure':
      return one('SYSTEM_MESSAGE', { level: 'SYSTEM_MESSAGE_LEVEL_ERROR', message: FAILURE_MESSAGES[d.reason as SessionFailure] }, d.custom);
    case 'session.handoff_triggered':
      return one('SERVICE_AGENT_TRIGGERED_HANDOFF', {}, d.custom);
    case 'session.agent_left':
      return one('SERVICE_AGENT_LEFT', {}, d.custom);
    case 'session.handoff_accepted':
      return one('HANDOFF_ACCEPTED', {}, d.custom);
    case 'session.client_handoff_required':
      return one('CLIENT_HANDOFF_REQUIRED', { reason: d.reason, queue_name: d.destination }, d.custom);
    case 'session.handoff_failed':
      return one('HANDOFF_FAILED', {}, d.custom);
    case 'session.queue_status':
      return one('HANDOFF_QUEUE_STATUS', { queue_name: d.destination, ...(d.position !== null && d.position !== undefined ? { position_in_queue: d.position } : {}) }, d.custom);
    case 'session.handoff_timeout':
      return one('HANDOFF_TIMEOUT');
    case 'session.live_agent_joined':
      return one('LIVE_AGENT_JOINED', { agent: d.agent });
    case 'session.live_agent_typing':
      return one('LIVE_AGENT_TYPING', { state: d.state, agent_id: d.agent_id });
    case 'session.live_agent_message':
      return one('LIVE_AGENT_MESSAGE', { message_id: messageId(sessionId, seq!), text: d.text, attachments: [], response_suggestions: [], agent_id: d.agent_id });
    case 'session.live_agent_left':
      return one('LIVE_AGENT_LEFT');
    case 'session.ended':
      return one('SESSION_END', { reason: d.reason }, d.custom);
    default:
      // session.typing (for the desk), session.refused and session.duplicate (answers): no frame.
      return [];
  }
}

/** An event's fields, whether stored as `{type, data}` (the journal) or flat (as the machine emits it). */
const dataOf = (e: { type: string; data?: Record<string, unknown> }): Data => (e.data ?? (e as Data)) as Data;

/**
 * The frames of a committed step, in order. `journaledOnly`: only those a replay sends (with a sequence).
 * Ids are stable: journaled frames are named by their sequence, transient ones by the step's version and
 * their place in it.
 */
export function renderStep(sessionId: string, step: CommittedStep, journaledOnly = false): Frame[] {
  const out: Frame[] = [];
  const timestamp = new Date(step.at).toISOString();
  let t = 0;
  for (const e of step.events) {
    const d = dataOf(e);
    if (journaledOnly && typeof d.seq !== 'number') continue;
    for (const f of frames(sessionId, e.type, d)) {
      const custom = f.custom ?? null;
      const wire: WireEvent = {
        id: eventUuid(sessionId, f.seq !== null ? `s${f.seq}` : `v${step.version}.${t++}`),
        sequence: f.seq,
        timestamp,
        type: EVENT_PREFIX + f.type,
        payload: f.payload,
        metadata: custom !== null ? { custom } : {},
      };
      out.push({ s: f.seq, j: JSON.stringify(wire) });
    }
  }
  return out;
}

/** The answer to an ask, from what its step emitted: a refusal, a duplicate's original sequence, or ok. */
export function replyOf(emitted: Array<{ type: string; data?: Record<string, unknown> }>): SessionReply {
  for (const e of emitted) {
    const d = dataOf(e);
    if (e.type === 'session.refused') return REFUSALS[d.reason as Refusal] ?? { ok: false, error: 'not_found' };
    if (e.type === 'session.duplicate') return { ok: true, duplicateOf: d.of as number };
  }
  return { ok: true };
}

/** A server event made at the gateway (errors and warnings for one socket): transient, random id. */
export function gatewayEvent(type: string, payload: Record<string, unknown>, custom: unknown): WireEvent {
  return {
    id: randomUUID(),
    sequence: null,
    timestamp: new Date().toISOString(),
    type: EVENT_PREFIX + type,
    payload,
    metadata: custom !== null && custom !== undefined ? { custom } : {},
  };
}

/** A SYSTEM_MESSAGE at a level, as the gateway sends it to one socket. */
export const systemMessage = (level: 'INFO' | 'WARNING' | 'ERROR', message: string, custom: unknown) =>
  gatewayEvent('SYSTEM_MESSAGE', { level: `SYSTEM_MESSAGE_LEVEL_${level}`, message }, custom);
