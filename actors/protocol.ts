import { Packr } from 'msgpackr';

/** Request/reply subject of a shard's actors. */
export const shardSubject = (shard: number): string => `sb.actors.${shard}`;

/** An event for an actor, as it travels to the shard's owner. */
export interface Envelope {
  kind: string;
  id: string;
  event: { type: string } & Record<string, unknown>;
  /** Idempotency key: a retry carries the same one, and the actor applies the event once. */
  eventId: string;
}

/** Why an ask failed at the host. `retry` tells the sender whether to try again (elsewhere, later). */
export type HostErrorCode = 'NOT_OWNER' | 'STALE' | 'UNKNOWN_KIND' | 'BAD_REQUEST' | 'ACTOR_ERROR' | 'STORE_ERROR';

export type Reply = { ok: true; reply: unknown } | { ok: false; code: HostErrorCode; message: string; retry: boolean };

// Records off: plain maps either side, so every message and stored snapshot decodes on its own, in any
// process, with no shared structure definitions.
const packr = new Packr({ useRecords: false });

export const encode = (value: unknown): Uint8Array => packr.pack(value);
export const decode = <T>(bytes: Uint8Array): T => packr.unpack(bytes) as T;
