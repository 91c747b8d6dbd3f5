/**
 * `Authorization: Bearer <token>` as every route that takes one reads it: the admin API and the inspector's feed
 * on the edge (the operator token), and the Messaging API's sessions step on the socket port (an access token).
 * One rule, so that a header one port takes the other takes too (docs/errors.md, "Bearer credentials"):
 *
 * - the scheme `Bearer` in any case (RFC 9110 11.1: case-insensitive);
 * - then one or more spaces or tabs (RFC 6750 2.1 writes one space; RFC 9110's whitespace, `OWS`, is spaces and
 *   tabs, and a client that sends two is not refused for it);
 * - then the token: visible ASCII characters (`!` to `~`), what an `OPERATOR_TOKEN` may hold (`platform/config.ts`)
 *   and a JWT always does; spaces or tabs after it are allowed (a proxy may leave them).
 *
 * Anything else is no bearer credential: no separator (`Bearertoken`), a second word after the token, another
 * separator such as a no-break space (the byte 0xA0, which both HTTP servers hand over as U+00A0, a whitespace to
 * JavaScript's `\s`, which the routes' patterns matched), or no token at all.
 */
const BEARER = /^bearer[ \t]+([\x21-\x7e]+)[ \t]*$/i;

/** The token of an `Authorization` header value in the `Bearer <token>` form (see above), or null. */
export function bearerToken(authorization: string | undefined): string | null {
  return authorization === undefined ? null : (BEARER.exec(authorization)?.[1] ?? null);
}
