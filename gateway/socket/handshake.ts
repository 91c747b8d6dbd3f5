import type { HttpRequest, HttpResponse } from '@trufflesuite/uws-js-unofficial';
import { SESSION_ID, type MessagingContext } from './context.js';
import { HTTP_ERRORS, type MessagingHttpError } from './errors.js';
import { otherRegion } from '../../platform/region.js';
import type { AccessClaims } from './tokens.js';

/** What the socket path's checks read of a request: its query and the client's address. */
export interface HandshakeRequest {
  sessionId: string;
  accessToken: string;
  rawCursor: string | undefined;
  remote: string;
  /** The request's `Host`, for the region it may name. */
  host: string;
}

/** The checks' verdict: the caller's claims and where its replay starts, or the HTTP error to answer with. */
export type HandshakeCheck =
  | { ok: true; sessionId: string; claims: AccessClaims; cursor: number }
  | { ok: false; error: MessagingHttpError; headers: Record<string, string> };

/**
 * Reads what the checks need. Called before anything is awaited: uWebSockets.js invalidates the request object
 * once the handler returns.
 */
export function handshakeRequest(res: HttpResponse, req: HttpRequest): HandshakeRequest {
  return {
    sessionId: req.getQuery('session_id') ?? '',
    accessToken: req.getQuery('access_token') ?? '',
    rawCursor: req.getQuery('cursor'),
    remote: Buffer.from(res.getRemoteAddressAsText()).toString(),
    host: req.getHeader('host'),
  };
}

/**
 * Reads `cursor`: an integer sequence or `seq:<n>`; anything else (logged) reads as 0, which replays the
 * whole history (contract 4.7).
 */
export function parseCursor(raw: string | undefined): { cursor: number; valid: boolean } {
  if (raw === undefined || raw === '') return { cursor: 0, valid: true };
  const m = /^(?:seq:)?(\d{1,15})$/.exec(raw.trim());
  return m ? { cursor: Number(m[1]), valid: true } : { cursor: 0, valid: false };
}

/**
 * The socket handshake's checks (contract 7.4, "Socket handshake"), in the order they answer: a Host naming
 * another region (421), the client address's rate (429), the parameters (400), the token and its connector
 * (401), the session's existence (404) and owner (401). One function for the WebSocket upgrade and for a plain GET of the socket path, so a client
 * that forgot the Upgrade header is told the same as one that sent it, before it is told to upgrade.
 *
 * Whether the session is still open, and has room for one more connection, is not here: the upgrade learns it
 * from the session actor's answer to CONNECT, which registers the connection (a plain GET must not).
 */
export async function checkHandshake(ctx: MessagingContext, r: HandshakeRequest): Promise<HandshakeCheck> {
  const refuse = (error: MessagingHttpError, headers: Record<string, string> = {}): HandshakeCheck => ({ ok: false, error, headers });
  // Addressed to another region's host: the wrong deployment, whatever else the request holds.
  if (ctx.region && otherRegion(r.host, ctx.region)) return refuse(HTTP_ERRORS.otherRegion);
  // Counted against the client address's bucket, like the HTTP steps: refused before any lookup.
  const wait = ctx.limitAddress(r.remote);
  if (wait) return refuse(HTTP_ERRORS.rateLimited, { 'retry-after': String(wait) });
  if (!r.sessionId || !r.accessToken) return refuse(HTTP_ERRORS.invalidConnectionParameters);
  const claims = await ctx.tokens.verify(r.accessToken);
  if (!claims || !(await ctx.connectorOf(claims))) return refuse(HTTP_ERRORS.authenticationFailed);
  // Who the session belongs to comes from its creation in the journal (no projection is read).
  const owner = SESSION_ID.test(r.sessionId) ? await ctx.history.owner(r.sessionId) : null;
  if (!owner) return refuse(HTTP_ERRORS.sessionNotFound);
  if (owner.connector_id !== claims.connector_id || owner.account_id !== claims.account_id) return refuse(HTTP_ERRORS.authenticationFailed);
  const { cursor, valid } = parseCursor(r.rawCursor);
  if (!valid) ctx.logger.info({ session: r.sessionId, cursor: r.rawCursor }, 'invalid cursor read as seq:0');
  return { ok: true, sessionId: r.sessionId, claims, cursor };
}
