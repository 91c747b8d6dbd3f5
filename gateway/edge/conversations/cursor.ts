/**
 * The Conversations API cursor: opaque and URL-safe, `<payload>.<mac>` in base64url. The payload is the
 * position (the last row's `started_at` and id for keyset walks, with how many rows the walk has passed, or
 * the rank reached for ranked modes, with the time the walk's first page was read, which every page ranks the
 * conversations as of: either way the offset of the next page, its `next_offset`) and a digest of the
 * filters it was issued for; the MAC (HMAC-SHA256 keyed with a deployment secret) makes a changed or
 * forged cursor a 400 rather than a walk from an arbitrary place.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { CONVERSATIONS } from '../../../platform/errors.js';

/**
 * Where a walk's next page starts. `rank`: `asOf` is when its first page was read (ms since epoch); the
 * ranking it pages through is the one of the conversations as they were then (`semantic.ts`).
 */
export type Position = { kind: 'after'; startedAt: string; id: string; offset: number } | { kind: 'rank'; offset: number; asOf: number };

export const malformedCursor = () => CONVERSATIONS.CURSOR_MALFORMED();

export interface CursorCodec {
  encode(filters: string, position: Position): string;
  /** The position, or a 400 for anything this deployment did not issue for these filters. */
  decode(filters: string, cursor: string): Position;
}

export function cursorCodec(secret: string): CursorCodec {
  const mac = (payload: string) => createHmac('sha256', secret).update(payload).digest().subarray(0, 16);
  const digest = (filters: string) => createHash('sha256').update(filters).digest('base64url').slice(0, 16);
  return {
    encode(filters, position) {
      const body = position.kind === 'after' ? ['a', position.startedAt, position.id, position.offset] : ['r', position.offset, position.asOf];
      const payload = Buffer.from(JSON.stringify([digest(filters), ...body])).toString('base64url');
      return `${payload}.${mac(payload).toString('base64url')}`;
    },
    decode(filters, cursor) {
      const m = /^([A-Za-z0-9_-]{1,2000})\.([A-Za-z0-9_-]{22})$/.exec(cursor);
      if (!m) throw malformedCursor();
      const given = Buffer.from(m[2], 'base64url');
      if (given.length !== 16 || !timingSafeEqual(given, mac(m[1]))) throw malformedCursor();
      let parsed: unknown;
      try {
        parsed = JSON.parse(Buffer.from(m[1], 'base64url').toString('utf8'));
      } catch {
        throw malformedCursor();
      }
      if (!Array.isArray(parsed) || parsed[0] !== digest(filters)) {
        throw CONVERSATIONS.CURSOR_OTHER_FILTERS();
      }
      if (parsed[1] === 'a' && parsed.length === 5 && typeof parsed[2] === 'string' && typeof parsed[3] === 'string' && Number.isSafeInteger(parsed[4]) && parsed[4] > 0) {
        return { kind: 'after', startedAt: parsed[2], id: parsed[3], offset: parsed[4] as number };
      }
      if (parsed[1] === 'r' && parsed.length === 4 && Number.isSafeInteger(parsed[2]) && parsed[2] >= 0 && Number.isSafeInteger(parsed[3]) && parsed[3] >= 0) {
        return { kind: 'rank', offset: parsed[2] as number, asOf: parsed[3] as number };
      }
      throw malformedCursor();
    },
  };
}
