/**
 * The catalog of errors the platform raises, with stable codes (in the manner of fastify's `lib/errors.js`).
 * Domain code throws `PlatformError`; each edge family renders it in its own error shape.
 */

/** One problem with one input field, as the Agents and Alerts families report it. */
export interface FieldError {
  field: string;
  message: string;
}

export const ERROR_CATALOG = {
  SB_VALIDATION: 400,
  SB_UNAUTHORIZED: 401,
  SB_FORBIDDEN: 403,
  SB_NOT_FOUND: 404,
  SB_CONFLICT: 409,
  SB_LIMIT: 409,
  SB_MALFORMED_ID: 422,
  SB_RATE_LIMITED: 429,
  SB_UNSUPPORTED: 501,
  SB_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOG;

export class PlatformError extends Error {
  readonly statusCode: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly errors: FieldError[] = [],
  ) {
    super(message);
    this.name = 'PlatformError';
    this.statusCode = ERROR_CATALOG[code];
  }
}

/** Too many requests for one key, project or address: the answer carries `Retry-After: retryAfterS`. */
export class RateLimitedError extends PlatformError {
  constructor(
    message: string,
    readonly retryAfterS: number,
  ) {
    super('SB_RATE_LIMITED', message);
  }
}

export const invalid = (field: string, message: string) =>
  new PlatformError('SB_VALIDATION', message, [{ field, message }]);
export const notFound = (what: string, field?: string) =>
  new PlatformError('SB_NOT_FOUND', `${what} not found`, field ? [{ field, message: `${what} not found` }] : []);
export const conflict = (message: string, errors: FieldError[] = []) => new PlatformError('SB_CONFLICT', message, errors);
export const forbidden = (message: string) => new PlatformError('SB_FORBIDDEN', message);
export const unauthorized = (message: string) => new PlatformError('SB_UNAUTHORIZED', message);
export const malformedId = (field: string) =>
  new PlatformError('SB_MALFORMED_ID', `malformed ${field}`, [{ field, message: `malformed ${field}` }]);
