/**
 * The Messaging API's error catalog (contract 7.4): the exact messages, with their HTTP statuses for the
 * access-token, session and handshake steps, and the event-level messages sent as SYSTEM_MESSAGE at level
 * ERROR. HTTP error bodies are `{success: false, error, error_code, error_message, data: null}`: the
 * hosted service's error shape, whose `error` and `error_message` both carry the table's message, exactly;
 * what in particular was wrong (which field), when there is more to say, is in `error_detail`.
 * The reference page `docs/errors.md` lists every code (a test keeps the two in step).
 */
import { SESSION_ERRORS } from '../../actors/session/mod.js';

export interface MessagingHttpError {
  status: number;
  code: string;
  message: string;
}

const e = (status: number, code: string, message: string): MessagingHttpError => ({ status, code, message });

export const HTTP_ERRORS = {
  // Access token step.
  missingAuthHeaders: e(401, 'MISSING_AUTHENTICATION_HEADERS', 'Missing authentication headers'),
  connectorUnknown: e(401, 'CONNECTOR_NOT_FOUND', 'Connector token does not exist'),
  connectorHostMismatch: e(401, 'CONNECTOR_VALIDATION_FAILED', 'Failed to validate connector'),
  connectorNoHost: e(401, 'CONNECTOR_MISSING_HOST', 'Connector missing host domain'),
  tokenCreateFailed: e(500, 'ACCESS_TOKEN_CREATION_FAILED', 'Failed to create access token'),
  // Session step.
  missingAccessToken: e(400, 'MISSING_ACCESS_TOKEN', 'Missing access token'),
  invalidAccessToken: e(401, 'INVALID_ACCESS_TOKEN', 'Invalid access token'),
  badRequest: e(400, 'REQUEST_PARSE_ERROR', 'Error parsing request'),
  sessionCreateFailed: e(500, 'SESSION_CREATION_FAILED', 'Failed to create session'),
  // Socket handshake.
  sessionNotFound: e(404, 'SESSION_NOT_FOUND', 'session not found'),
  authenticationFailed: e(401, 'AUTHENTICATION_FAILED', 'authentication failed'),
  connectionLimit: e(429, 'CONNECTION_LIMIT_EXCEEDED', 'connection limit exceeded for session'),
  // Caps of this gateway process (`connection-caps.ts`), past the per-session limit of 7.4: a 429 as it is.
  accountConnectionLimit: e(429, 'ACCOUNT_CONNECTION_LIMIT_EXCEEDED', 'connection limit exceeded for account'),
  gatewayConnectionLimit: e(429, 'GATEWAY_CONNECTION_LIMIT_EXCEEDED', 'connection limit exceeded for gateway'),
  invalidConnectionParameters: e(400, 'INVALID_CONNECTION_PARAMETERS', 'invalid connection parameters'),
  // A GET of the socket path without a WebSocket upgrade, whose handshake checks passed (contract 7.4 lists no 426).
  upgradeRequired: e(400, 'UPGRADE_REQUIRED', 'a WebSocket upgrade is required'),
  // Every step.
  // The Host names a region this deployment does not serve (contract, Conventions: no region-agnostic alias).
  otherRegion: e(421, 'REGION_MISMATCH', 'this address names a region this deployment does not serve'),
  rateLimited: e(429, 'RATE_LIMIT_EXCEEDED', 'Rate limit exceeded'),
  requestTimeout: e(408, 'REQUEST_TIMEOUT', 'Request body not received in time'),
  // An `Expect` other than 100-continue (RFC 9110 10.1.1), as the edge answers it: no entry of 7.4 is about an
  // expectation, and its 400 says the request is malformed, which it is not.
  expectationFailed: e(417, 'EXPECTATION_FAILED', 'the gateway meets no expectation but 100-continue'),
  notFound: e(404, 'NOT_FOUND', 'Not found'),
  internal: e(500, 'INTERNAL_ERROR', 'Internal server error'),
  // Live-agent desk.
  deskUnauthorized: e(401, 'UNAUTHORIZED', 'missing or invalid x-api-key (scope live_agent)'),
  deskNotWaiting: e(409, 'SESSION_NOT_WAITING', 'the session is not waiting for a live agent'),
  deskNotLive: e(409, 'SESSION_NOT_LIVE', 'no live agent is in the session'),
  deskNotAgent: e(403, 'NOT_SESSION_AGENT', 'another live agent holds the session'),
} as const;

export const errorBody = (err: MessagingHttpError, detail?: string) =>
  JSON.stringify({ success: false, error: err.message, error_code: err.code, error_message: err.message, ...(detail ? { error_detail: detail } : {}), data: null });

/** Event-level errors (SYSTEM_MESSAGE, level ERROR; the socket stays open). */
export const EVENT_ERRORS = {
  invalidFormat: 'Unknown event type or invalid message format',
  notAllowed: (type: string) => `Event type not allowed: ${type}`,
  unableToRetrieve: 'Error: Unable to retrieve session',
  connectorNotFound: 'Error: Connector not found',
  ...SESSION_ERRORS,
} as const;

/**
 * Stable codes of the event-level errors, for logs, tests and `docs/errors.md`. They are not on the wire: a
 * SYSTEM_MESSAGE carries the message only, as the contract's clients expect.
 */
export const EVENT_ERROR_CODES: Record<keyof typeof EVENT_ERRORS, string> = {
  overload: 'EVENT_ERROR_OVERLOAD',
  start: 'EVENT_ERROR_START_FAILED',
  respond: 'EVENT_ERROR_RESPOND_FAILED',
  stream: 'EVENT_ERROR_STREAM',
  sessionNotFound: 'EVENT_ERROR_SESSION_NOT_FOUND',
  conversationNotFound: 'EVENT_ERROR_CONVERSATION_NOT_FOUND',
  conversationIdNotFound: 'EVENT_ERROR_CONVERSATION_ID_NOT_FOUND',
  handoffConnect: 'EVENT_ERROR_HANDOFF_CONNECT',
  forward: 'EVENT_ERROR_FORWARD_FAILED',
  handoffInit: 'EVENT_ERROR_HANDOFF_INIT',
  invalidFormat: 'EVENT_ERROR_INVALID_FORMAT',
  notAllowed: 'EVENT_ERROR_NOT_ALLOWED',
  unableToRetrieve: 'EVENT_ERROR_SESSION_UNAVAILABLE',
  connectorNotFound: 'EVENT_ERROR_CONNECTOR_NOT_FOUND',
};

/** The warning sent for a client event dropped by the socket rate limit. */
export const RATE_LIMIT_WARNING = 'Rate limit exceeded: message dropped. Slow down and retry.';
