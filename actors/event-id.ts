import { randomBytes } from 'node:crypto';

/**
 * This process's (or thread's) prefix of event ids: 96 bits from the CSPRNG, drawn once, as 16 base64url
 * characters.
 */
const PREFIX = randomBytes(12).toString('base64url');
let counter = 0;

/**
 * A fresh event id for an ask (its idempotency key, which the actor remembers: `PersistedActor.a`): this
 * process's random prefix and a counter in base 36, 17 to 27 characters. Unique across processes, threads and
 * restarts as a random UUID is, and about half as long: an actor's snapshot keeps its last eight and is
 * encoded again on every step (bench/README.md, twenty-first session). Not a secret: only the platform's own
 * code asks actors, and a caller that wants a retry to count once passes its own (`AskOptions.eventId`).
 */
export function newEventId(): string {
  return PREFIX + (counter++).toString(36);
}
