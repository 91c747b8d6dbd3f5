import { createHash, randomUUID } from 'node:crypto';
import type { OutEvent } from '../../machines/session.js';

/**
 * The Messaging API's wire format of a server event (addendum "Envelope"): `id` (UUID), `sequence`,
 * `timestamp` (ISO 8601), `type` with its `EVENT_TYPE_` prefix, `payload` and `metadata` (with the client's
 * `custom` echoed when the event answers one that carried it).
 */
export interface WireEvent {
  id: string;
  sequence: number | null;
  timestamp: string;
  type: string;
  payload: Record<string, unknown>;
  metadata: { custom?: Record<string, unknown> };
}

export const EVENT_PREFIX = 'EVENT_TYPE_';

/**
 * A UUID derived from the session id and the event's running number (name-based, in the manner of UUID
 * v5): the same event gets the same id however often it is published or replayed, so clients can
 * de-duplicate by id after a retry or a failover.
 */
export function eventUuid(sessionId: string, n: number): string {
  const h = createHash('sha1').update(`${sessionId}:${n}`).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

export function toWire(sessionId: string, e: OutEvent): WireEvent {
  return {
    id: eventUuid(sessionId, e.n),
    sequence: e.seq,
    timestamp: new Date(e.at).toISOString(),
    type: EVENT_PREFIX + e.type,
    payload: e.payload,
    metadata: e.custom ? { custom: e.custom } : {},
  };
}

/** A server event made at the gateway (errors and warnings for one socket): transient, random id. */
export function gatewayEvent(type: string, payload: Record<string, unknown>, custom: Record<string, unknown> | null): WireEvent {
  return {
    id: randomUUID(),
    sequence: null,
    timestamp: new Date().toISOString(),
    type: EVENT_PREFIX + type,
    payload,
    metadata: custom ? { custom } : {},
  };
}

/** A SYSTEM_MESSAGE at a level, as the gateway sends it to one socket. */
export const systemMessage = (level: 'INFO' | 'WARNING' | 'ERROR', message: string, custom: Record<string, unknown> | null) =>
  gatewayEvent('SYSTEM_MESSAGE', { level: `SYSTEM_MESSAGE_LEVEL_${level}`, message }, custom);
