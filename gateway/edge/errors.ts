import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { EDGE, type FieldError, PlatformError, RateLimitedError } from '../../platform/errors.js';

/**
 * How an interface family renders errors. The Agents, Alerts and admin families answer
 * `{message, errors: [{field, message}]}`; the conversation-side families answer `{error_message}`.
 * What they render comes from the families' catalogs in `platform/errors.ts` (reference: `docs/errors.md`).
 */
export type ErrorShape = 'fields' | 'error_message';

interface Problem {
  status: number;
  /** The catalog code (`platform/errors.ts`) when the error came from a catalog. */
  code?: string;
  message: string;
  errors: FieldError[];
  /** Response headers that belong to the error (`Retry-After` of a 429). */
  headers?: Record<string, string>;
}

interface ValidationIssue {
  instancePath?: string;
  message?: string;
}

const problemOf = (err: PlatformError): Problem => ({ status: err.statusCode, code: err.code, message: err.message, errors: err.errors });

/**
 * Turns anything thrown in a request into a status and message; never leaks internals of a 5xx. A body of a
 * type no parser takes is a 400 (`EDGE_CONTENT_TYPE_UNSUPPORTED`: the contract's error tables have no 415, and
 * count it among the body's validation errors), and so is a body past the edge's limit (`EDGE_BODY_TOO_LARGE`:
 * no 413 either; the outbound trigger's table says 400 for `metadata` over the size limit, however large).
 * Other 4xx errors (Fastify's own, the JSON body parser's) keep their status and message.
 */
export function toProblem(err: unknown, request: FastifyRequest): Problem {
  if (err instanceof RateLimitedError) return { ...problemOf(err), headers: { 'retry-after': String(err.retryAfterS) } };
  if (err instanceof PlatformError) return problemOf(err);
  const e = err as FastifyError & { validation?: ValidationIssue[]; validationContext?: string };
  if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return problemOf(EDGE.CONTENT_TYPE_UNSUPPORTED(request.headers['content-type'] ?? 'none'));
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return problemOf(EDGE.BODY_TOO_LARGE(BODY_LIMIT));
  if (Array.isArray(e.validation)) {
    const context = e.validationContext ?? 'body';
    // One entry per field and message: a value can break two checks that say the same thing (an integer past
    // 2^53 is neither a safe integer nor under the maximum).
    const seen = new Set<string>();
    const errors: FieldError[] = [];
    for (const v of e.validation) {
      const error = { field: fieldName(context, v.instancePath), message: v.message ?? 'invalid value' };
      const key = `${error.field}\u0000${error.message}`;
      if (!seen.has(key)) errors.push(error);
      seen.add(key);
    }
    // A malformed path id is 422 (contract 7.1); everything else about the request is 400.
    if (context === 'params') return problemOf(EDGE.MALFORMED_PARAMS.withErrors(errors, errors.map((x) => x.field).join(', ')));
    return problemOf(EDGE.VALIDATION.withErrors(errors));
  }
  const status = typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500 ? e.statusCode : 500;
  if (status === 500) {
    request.log.error({ err }, 'unhandled error');
    return problemOf(EDGE.INTERNAL());
  }
  return { status, message: e.message || 'bad request', errors: [{ field: 'body', message: e.message }] };
}

function fieldName(context: string, instancePath: string | undefined): string {
  const path = (instancePath ?? '').split('/').filter(Boolean).join('.');
  if (path) return path;
  return context === 'querystring' ? 'query' : context;
}

/** The edge's largest request body, in bytes (External Events set their own, `EXTERNAL_EVENTS_MAX_BYTES`). */
export const BODY_LIMIT = 1024 * 1024;

/**
 * The answer to a URL the router refuses before any route sees it (Fastify's `frameworkErrors`): a path
 * segment that is not valid percent-encoding, or one longer than the router takes. Both are 400 in the shape
 * of the family the path belongs to, not Fastify's own body.
 */
export function frameworkProblem(err: FastifyError): Problem {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return problemOf(EDGE.PATH_SEGMENT_TOO_LONG(MAX_PARAM_LENGTH));
  return problemOf(EDGE.URL_MALFORMED());
}

/**
 * The router's longest path segment. Far past any id, so that a long id reaches its route, which checks the
 * credentials first and then answers it as that family answers a malformed or unknown id (Agents: 422);
 * only a segment past this is refused before any route, with 400.
 */
export const MAX_PARAM_LENGTH = 4096;

/**
 * The body of an answer the HTTP layer gives before any family's route: it carries both error shapes,
 * `message` and `errors` as the Agents, Alerts and admin families write them, and `error_message` as the
 * others do.
 */
const bothShapes = (message: string, field = 'request') => JSON.stringify({ message, errors: [{ field, message }], error_message: message });

/**
 * What the edge answers a connection whose request Node's parser refused before any route (headers larger
 * than Node takes: 431; a malformed request line: 400; a request not complete by the request deadline: 408).
 * No path is known then, so the body carries both error shapes (`bothShapes`).
 */
export function clientErrorResponse(err: NodeJS.ErrnoException): string {
  const [status, reason, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'the request headers are larger than the edge takes']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'the request did not arrive in time']
        : [400, 'Bad Request', 'the request is not valid HTTP'];
  const body = bothShapes(message);
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${body}`;
}

/**
 * Node's server answers two more requests itself, before any route, with no body: an HTTP/1.1 request without
 * `Host` (RFC 9112 3.2: 400) and an `Expect` other than `100-continue` (RFC 9110 10.1.1: 417). The edge gives
 * them the body of `clientErrorResponse`, and closes the connection as for those (the body is not read).
 * This is the `Expect` one: the server's `checkExpectation` listener, which Node calls instead of answering.
 */
export function expectationFailed(_req: IncomingMessage, res: ServerResponse): void {
  const body = bothShapes('the edge meets no expectation but 100-continue', 'expect');
  res.writeHead(417, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' }).end(body);
}

/**
 * The `Host` one (see `expectationFailed`), an `onRequest` hook run before any other: Node's own check is
 * off (`requireHostHeader: false`), as it answers with no body.
 */
export async function requireHost(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
  if (request.headers.host !== undefined || request.raw.httpVersion !== '1.1') return undefined;
  return reply.code(400).header('connection', 'close').type('application/json').send(bothShapes('an HTTP/1.1 request must have a Host header', 'host'));
}

/** The answer to a request no route matches. */
export const routeNotFound = (request: FastifyRequest): Problem =>
  problemOf(EDGE.ROUTE_NOT_FOUND(request.method, request.url.split('?')[0]));

/**
 * The one-line message of the `{error_message}` shape, which has no field list: a validation error names its
 * fields in it (`validation error: conversation_id is required; channel must be ...`).
 */
function errorMessage(p: Problem): string {
  if (p.code !== EDGE.VALIDATION.code || p.errors.length === 0) return p.message;
  return `${p.message}: ${p.errors.map((e) => (e.message.startsWith(e.field) ? e.message : `${e.field} ${e.message}`)).join('; ')}`;
}

/** Renders a problem in the given shape. */
export function sendProblem(reply: FastifyReply, shape: ErrorShape, p: Problem): FastifyReply {
  const body = shape === 'fields' ? { message: p.message, errors: p.errors } : { error_message: errorMessage(p) };
  if (p.headers) reply.headers(p.headers);
  return reply.code(p.status).type('application/json').send(JSON.stringify(body));
}

/**
 * A `preValidation` hook that refuses a query parameter given more than once (`?metric=a&metric=b`): the parser
 * makes it a list, which would otherwise be refused as a value of the wrong type, or as one that breaks the
 * parameter's rule when each value alone keeps it. For the families whose parameters are all single-valued.
 */
export async function refuseRepeatedQuery(request: FastifyRequest): Promise<void> {
  const query = request.query as Record<string, unknown> | undefined;
  for (const name in query) if (Array.isArray(query[name])) throw EDGE.QUERY_REPEATED(name);
}

/** Installs a family's error handler in its encapsulated context, so each family speaks its own error shape. */
export function useErrorShape(app: FastifyInstance, shape: ErrorShape): void {
  app.setErrorHandler((err, request, reply) => sendProblem(reply, shape, toProblem(err, request)));
}

/** Paths whose families answer in the `fields` shape; every other path answers `{error_message}`. */
const FIELD_SHAPED = /^\/(?:v1\/(?:agents|alert-rules|alerts|webhook-endpoints)|admin)(?:[/?;#]|$)/;
/** The scheme and authority of a request target in absolute form (`GET http://host/v1/agents HTTP/1.1`). */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * The shape of an unmatched route: the one its path's family would use, judged by the path alone (a target
 * in absolute form, or a prefix followed by `;` or `#`, belongs to the family its path names).
 */
export function shapeForPath(url: string): ErrorShape {
  return FIELD_SHAPED.test(url.replace(ABSOLUTE_FORM, '')) ? 'fields' : 'error_message';
}
