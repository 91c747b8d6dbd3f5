/**
 * Ids of the actors created at a high rate (conversations, messaging sessions) that begin with their creation
 * time, so that they sort by it. Each step of such an actor rewrites its records in the store's B-trees (its
 * snapshot, its header, then its read models), keyed by its id. With random ids the
 * live actors are spread over the whole tree and every group commit copies and flushes a leaf page per actor;
 * with ids that sort by time the live ones (mostly recent) share a few leaves at the end of each tree, and a
 * commit writes and flushes fewer pages. The same reason MongoDB's ObjectIds and RFC 9562's UUID version 7
 * begin with a timestamp. The rest of each id is random from a CSPRNG: ids are names, never credentials.
 */
import { randomBytes } from 'node:crypto';
import { BASE62, randomBase62 } from './secrets.js';

/**
 * A UUID version 7 (RFC 9562, section 5.7): 48 bits of Unix time in milliseconds, the version and variant
 * bits, and 74 random bits, in the usual 8-4-4-4-12 hex form. Ids made in the same millisecond are in no
 * particular order among themselves.
 */
export function uuidv7(now = Date.now()): string {
  const b = randomBytes(16);
  b.writeUIntBE(now, 0, 6);
  b[6] = 0x70 | (b[6] & 0x0f);
  b[8] = 0x80 | (b[8] & 0x3f);
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Base62 digits of the time: eight, enough for Unix milliseconds until the year 8888. */
const TIME_DIGITS = 8;
/** Random base62 digits after the time: about 71 bits. */
const RANDOM_DIGITS = 12;

/**
 * A resource id that sorts by creation time: `prefix_`, eight base62 digits of the Unix milliseconds (fixed
 * width, so the text sorts as the number), then twelve random base62 digits (`randomBase62`).
 */
export function timeOrderedId(prefix: string, now = Date.now()): string {
  let time = '';
  for (let i = 0, t = now; i < TIME_DIGITS; i++, t = Math.floor(t / 62)) time = BASE62[t % 62] + time;
  return `${prefix}_${time}${randomBase62(RANDOM_DIGITS)}`;
}
