import { Packr } from 'msgpackr';
import type { Transport } from './transport/types.js';

/** Request/reply subject of a shard's actors. */
export const shardSubject = (shard: number): string => `sb.actors.${shard}`;

/** An event for an actor, as it travels to the shard's owner. */
export interface Envelope {
  kind: string;
  id: string;
  event: { type: string } & Record<string, unknown>;
  /** Idempotency key: a retry carries the same one, and the actor applies the event once. */
  eventId: string;
  /**
   * The asker's own writes follow the reply through this host's commit order (`AskOptions.ordered`): answer
   * once the step's commit is queued rather than durable. Honoured only for an ask from this thread.
   */
  ordered?: true;
  /**
   * How long the asker goes on waiting for the answer (what is left of its deadline, retries included), in ms
   * from when it sent this attempt. The host applies no event whose asker has given up (`EXPIRED`): under an
   * overload a mailbox would otherwise hold steps no one waits for, which delay every later one, and a client
   * told that its request failed would see it applied later. Absent: no limit (events an actor sends itself).
   */
  waitMs?: number;
}

/** Why an ask failed at the host. `retry` tells the sender whether to try again (elsewhere, later). */
export type HostErrorCode = 'NOT_OWNER' | 'STALE' | 'EXPIRED' | 'UNKNOWN_KIND' | 'BAD_REQUEST' | 'ACTOR_ERROR' | 'STORE_ERROR';

export type Reply = { ok: true; reply: unknown } | { ok: false; code: HostErrorCode; message: string; retry: boolean };

// Records off: plain maps either side, so every message and stored snapshot decodes on its own, in any
// process, with no shared structure definitions.
const packr = new Packr({ useRecords: false });

export const encode = (value: unknown): Uint8Array => packr.pack(value);

/**
 * A payload that stays in this process: the in-process transport hands a payload to its subscribers as it was
 * sent, so a message between a client and an actor host in the same process (an ask, its reply, a session's
 * published frames) travels as the value itself, neither encoded nor decoded. The two encodings and two
 * decodings of every ask were a measurable share of a step's main-thread time (bench/README.md, seventh
 * session). Like every in-process payload it is immutable by convention: a receiver may keep it (an actor
 * remembers its replies, a machine may keep parts of an event), so neither side changes it once sent.
 */
class InProcess extends Uint8Array {
  constructor(readonly value: unknown) {
    super(0);
  }
}

/** Encodes a message for `transport`: as is on the in-process transport (see `InProcess`), msgpack on any other. */
export const encodeFor = (transport: Pick<Transport, 'kind'>, value: unknown): Uint8Array =>
  transport.kind === 'inproc' ? new InProcess(value) : encode(value);

/** Whether a payload was sent from this thread (the in-process transport's value, see `InProcess`). */
export const isInProcess = (data: Uint8Array): boolean => data instanceof InProcess;

/** The bytes of a payload for a transport that copies them (a thread's port): an in-process payload encoded, any other as it is. */
export const bytesOf = (data: Uint8Array): Uint8Array => (data instanceof InProcess ? encode(data.value) : data);

/**
 * What is stored for an actor (the snapshot record's data, which the store encodes): the XState persisted
 * snapshot, the recently applied event ids with the versions that applied them (each answer is in that
 * version's journal entry, `JournalEntry.reply`), and the deadline the host keeps for it
 * (`ActorKind.deadline`: its name and when), if any. The host writes it; the inspector reads it.
 */
export interface PersistedActor {
  s: unknown;
  a: Array<[string, number]>;
  d?: [string, number];
}
/** Decodes a message from any transport. */
export const decode = <T>(bytes: Uint8Array): T => (bytes instanceof InProcess ? (bytes.value as T) : (packr.unpack(bytes) as T));
