import type { HttpRequest, HttpResponse } from '@trufflesuite/uws-js-unofficial';
import { otherCoding } from '../../platform/codings.js';
import { jsonTooDeep } from '../../platform/json-depth.js';
import { unstorableJson } from '../../platform/json-unstorable.js';
import { utf8 } from '../../platform/utf8.js';
import { errorBody, HTTP_ERRORS, type MessagingHttpError } from './errors.js';
import { otherRegion, type Region } from '../../platform/region.js';
import { context, contextFromHeaders, SpanKind, SpanStatusCode, trace, tracer, tracingStarted, type Context, type Span } from '../../platform/telemetry.js';
import secureJsonParse from 'secure-json-parse';

/**
 * JSON as the socket gateway takes it, in frames and in HTTP bodies: throws on malformed text and on a key named
 * `__proto__`, as the edge refuses one (`gateway/edge/json-body.ts`): copied, it would become a prototype or be
 * renamed by the journal's encoding, so it would not be echoed or replayed as sent. For the same reason it
 * throws on what `unstorableJson` finds (a lone surrogate escape, a number past a double's range): the
 * callers answer an invalid frame or body, as for malformed text.
 */
export function parseJson(text: string): unknown {
  const value = secureJsonParse.parse(text, undefined, { protoAction: 'error', constructorAction: 'ignore' });
  const unstorable = unstorableJson(text, value);
  if (unstorable !== null) throw new SyntaxError(`JSON ${unstorable}`);
  return value;
}

/** Largest HTTP body the gateway reads. */
export const MAX_BODY_BYTES = 64 * 1024;

/** What a handler gets: the headers it asked for, the path parameters, the query string and the body. */
export interface HttpCall {
  headers: Record<string, string>;
  params: string[];
  query: string;
  url: string;
  /** The client's address as the socket sees it (the rate limit of the token step is per connector and address). */
  remote: string;
  /** Undefined when the body was larger than MAX_BODY_BYTES. */
  body: Buffer | undefined;
  /**
   * The first content coding other than identity a non-empty body was sent with (`Content-Encoding: gzip`), in
   * lower case; null when none. The gateway undoes none: `bodyObject` refuses such a body.
   */
  contentCoding: string | null;
}

/** A handler's answer. */
export interface HttpAnswer {
  status: number;
  body: string;
  headers?: Record<string, string>;
}

/** Thrown by handlers to answer with a catalog error. */
export class HttpFailure extends Error {
  constructor(
    readonly error: MessagingHttpError,
    readonly headers: Record<string, string> = {},
    readonly detail?: string,
  ) {
    super(detail ?? error.message);
  }
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  408: 'Request Timeout',
  409: 'Conflict',
  417: 'Expectation Failed',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export const statusLine = (status: number) => `${status} ${STATUS_TEXT[status] ?? 'Unknown'}`;

/**
 * Writes a response unless the client has gone; the answer to a HEAD (`head`) without its body, with the
 * length the GET's would have.
 */
export function write(res: HttpResponse, aborted: () => boolean, a: HttpAnswer, head = false): void {
  if (aborted()) return;
  res.cork(() => {
    res.writeStatus(statusLine(a.status)).writeHeader('content-type', 'application/json');
    // Browser widgets call from the customer's own site; the credentials are headers, never cookies.
    res.writeHeader('access-control-allow-origin', '*');
    if (a.status === 429) res.writeHeader('access-control-expose-headers', 'Retry-After');
    for (const [k, v] of Object.entries(a.headers ?? {})) res.writeHeader(k, v);
    if (head) withoutBody(res, a.body);
    else res.end(a.body);
  });
}

export const failure = (err: unknown): HttpAnswer => {
  if (err instanceof HttpFailure) return { status: err.error.status, body: errorBody(err.error, err.detail), headers: err.headers };
  return { status: 500, body: errorBody(HTTP_ERRORS.internal) };
};

/**
 * The values of the named headers (lower case), each header's lines joined as one list (RFC 9110 5.3): uWS's
 * `getHeader` gives the first line only, so `Content-Encoding: identity` then `Content-Encoding: gzip` would read
 * as identity. Undefined for a header not sent. Called before the handler returns, as every read of `req`.
 * The walk over every header (a native call and two strings each) is made only when one of the names has a first
 * line: most requests send none, and a header whose first line is empty reads as not sent.
 */
export function headerLists(req: HttpRequest, names: readonly string[]): Record<string, string | undefined> {
  const lists: Record<string, string | undefined> = {};
  if (names.every((name) => req.getHeader(name) === '')) return lists;
  req.forEach((key, value) => {
    if (!names.includes(key)) return;
    const had = lists[key];
    lists[key] = had === undefined ? value : `${had}, ${value}`;
  });
  return lists;
}

/** What a route may be told: whether it reads a body, and how long the whole body may take to arrive. */
export interface RouteOptions {
  body?: boolean;
  /**
   * A body not received whole within this is answered 408 and the connection closed. uWebSockets.js drops a
   * request whose data trickles in below its own throughput floor; this bounds one that stays just above it.
   */
  bodyTimeoutMs?: number;
  /** The region this deployment serves: a request whose Host names another is refused (`otherRegion`). */
  region?: Region;
}

/**
 * Adapts an async handler to uWebSockets.js: reads the named headers, parameters and query before anything
 * is awaited (uWS invalidates the request object after the handler returns), reads the body within the body
 * deadline, and answers once unless the client aborted.
 */
export function route(headerNames: string[], paramCount: number, handler: (call: HttpCall) => Promise<HttpAnswer>, opts: RouteOptions = {}) {
  return (res: HttpResponse, req: HttpRequest) => {
    const headers: Record<string, string> = {};
    for (const h of headerNames) headers[h] = req.getHeader(h);
    const params = Array.from({ length: paramCount }, (_, i) => req.getParameter(i));
    const query = req.getQuery() ?? '';
    const url = req.getUrl();
    const remote = Buffer.from(res.getRemoteAddressAsText()).toString();
    const contentEncoding = opts.body === false ? undefined : headerLists(req, ['content-encoding'])['content-encoding'];
    // While tracing is on: one server span per HTTP step, continuing an incoming traceparent.
    let span: Span | null = null;
    let spanCtx: Context | null = null;
    if (tracingStarted()) {
      const method = req.getMethod().toUpperCase();
      const traceparent = req.getHeader('traceparent');
      const parent = traceparent ? contextFromHeaders({ traceparent, tracestate: req.getHeader('tracestate') }) : context.active();
      const path = params.reduce((p, v) => (v ? p.replace(`/${v}`, '/:param') : p), url);
      span = tracer.startSpan(`${method} ${path}`, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, 'http.route': path } }, parent);
      spanCtx = trace.setSpan(parent, span);
    }
    let aborted = false;
    let deadline: NodeJS.Timeout | undefined;
    res.onAborted(() => {
      aborted = true;
      clearTimeout(deadline);
    });
    const answer = (a: HttpAnswer) => {
      const s = span;
      span = null;
      if (s) {
        s.setAttribute('http.response.status_code', a.status);
        if (a.status >= 500) s.setStatus({ code: SpanStatusCode.ERROR, message: String(a.status) });
        s.end();
      }
      write(res, () => aborted, a);
    };
    // Read now (uWS invalidates the request); refused once the body is in, as every other refusal is.
    const misdirected = opts.region !== undefined && otherRegion(req.getHeader('host'), opts.region) !== null;
    // An empty body has no coding to undo, whatever its headers say (as an empty body has no type).
    const call = (body: Buffer | undefined, contentCoding: string | null) =>
      misdirected ? Promise.reject(new HttpFailure(HTTP_ERRORS.otherRegion)) : handler({ headers, params, query, url, remote, body, contentCoding });
    const run = (body: Buffer | undefined, contentCoding: string | null) =>
      (spanCtx ? context.with(spanCtx, call, undefined, body, contentCoding) : call(body, contentCoding)).then(answer).catch((err) => answer(failure(err)));
    if (opts.body === false) {
      void run(Buffer.alloc(0), null);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    let timedOut = false;
    deadline = opts.bodyTimeoutMs
      ? setTimeout(() => {
          if (aborted) return;
          timedOut = true;
          aborted = true; // nothing else may use this response
          if (span) {
            span.setAttribute('http.response.status_code', 408);
            span.end();
          }
          res.cork(() => {
            res.writeStatus(statusLine(408)).writeHeader('content-type', 'application/json').writeHeader('access-control-allow-origin', '*');
            // Closing the connection: the rest of the body would otherwise be read as the next request.
            res.end(errorBody(HTTP_ERRORS.requestTimeout), true);
          });
        }, opts.bodyTimeoutMs)
      : undefined;
    res.onData((chunk, isLast) => {
      if (timedOut) return;
      if (!tooLarge) {
        size += chunk.byteLength;
        if (size > MAX_BODY_BYTES) tooLarge = true;
        // uWS reuses the chunk's memory after this callback: copy it.
        else chunks.push(Buffer.from(new Uint8Array(chunk).slice()));
      }
      if (!isLast) return;
      clearTimeout(deadline);
      void run(tooLarge ? undefined : Buffer.concat(chunks), size > 0 ? otherCoding(contentEncoding, 'identity') : null);
    });
  };
}

/** A JSON success answer. */
export const ok = (value: unknown, status = 200): HttpAnswer => ({ status, body: JSON.stringify(value) });

/**
 * Parses a JSON object body: empty means `{}`; anything else that is not a UTF-8 JSON object, or that nests
 * deeper than `JSON_MAX_DEPTH`, is null (the callers' 400).
 */
export function jsonObject(body: Buffer | undefined): Record<string, unknown> | null {
  if (body === undefined) return null;
  // Not UTF-8 is a malformed body, like the edge's (`platform/utf8.ts`): decoding it with replacement characters
  // would store text nobody sent (a desk agent's message).
  const text = utf8(body)?.trim();
  if (text === undefined) return null;
  if (!text) return {};
  if (jsonTooDeep(text)) return null;
  try {
    const v = parseJson(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * A step's body as a JSON object (`jsonObject`), or the step's 400 `REQUEST_PARSE_ERROR` (contract 7.4, "Error
 * parsing request": the catalog's error for a body the step cannot read). A body sent with a content coding is
 * refused so, its `error_detail` naming the coding, as the edge refuses one (`EDGE_CONTENT_ENCODING_UNSUPPORTED`,
 * also a 400: the contract lists no 415): the gateway undoes none, and gzip's bytes were parsed as JSON (a 400
 * that did not say why) while a plain body labelled `br` was taken as if unlabelled. Called by each step once
 * its credentials have passed, as every check of the body is.
 */
export function bodyObject(call: Pick<HttpCall, 'body' | 'contentCoding'>): Record<string, unknown> {
  if (call.contentCoding !== null) {
    throw new HttpFailure(HTTP_ERRORS.badRequest, {}, `Content-Encoding ${call.contentCoding} is not supported: send the body without a content coding`);
  }
  const parsed = jsonObject(call.body);
  if (!parsed) throw new HttpFailure(HTTP_ERRORS.badRequest);
  return parsed;
}

/** CORS preflight of the Messaging API's HTTP endpoints. */
export function preflight(res: HttpResponse): void {
  res.cork(() => {
    res
      .writeStatus('204 No Content')
      .writeHeader('access-control-allow-origin', '*')
      .writeHeader('access-control-allow-methods', 'GET, POST, OPTIONS')
      .writeHeader('access-control-allow-headers', 'Authorization, Content-Type, X-Token, X-Host, X-Api-Key')
      .writeHeader('access-control-max-age', '600')
      .end();
  });
}

/**
 * Ends the answer to a HEAD: the headers with the length `body` would have, no body. The length is written as a
 * header because this uWebSockets.js build aborts the process when `endWithoutBody` is given one.
 */
export function withoutBody(res: HttpResponse, body: string): void {
  res.writeHeader('content-length', String(Buffer.byteLength(body)));
  res.endWithoutBody();
}

/**
 * Ends the answer to a HEAD as `withoutBody` does (the headers with the length `body` would have, no body), then
 * closes the connection: a framing refusal's answer, after which what the client sends cannot be read as its
 * next request. This uWebSockets.js build closes the connection of an answer without a body only when that answer
 * says `Content-Length: 0` (`endWithoutBody(0, true)`: it aborts the process for any other length, or no length),
 * and a HEAD's answer must say the GET's length or none (RFC 9110 8.6). So the head is written as the head of a
 * body still to come (`tryEnd` of nothing with the body's length: the head whole, its `Content-Length` the
 * GET's), and the connection is closed once the handler's cork has sent it (on the next turn of the event loop;
 * closed within the cork, it would go unsent). Called from a request handler, before it returns.
 */
export function closeWithoutBody(res: HttpResponse, body: string): void {
  const length = Buffer.byteLength(body);
  if (length === 0) {
    res.endWithoutBody(0, true);
    return;
  }
  let gone = false;
  // The answer is not over when the handler returns (uWS then asks for an abort handler); the close calls it too.
  res.onAborted(() => (gone = true));
  res.tryEnd('', length);
  setImmediate(() => {
    if (!gone) res.close();
  });
}
