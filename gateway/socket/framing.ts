/**
 * What the socket gateway refuses of any request before its route runs, as the edge's HTTP server does before
 * routing (`gateway/edge/errors.ts`, `body-headers.ts`). uWebSockets.js (20.30) itself:
 * - closes the connection, writing nothing and calling no handler, on an HTTP/1.1 request without `Host` that
 *   has another header, and leaves one with no header at all unanswered until its idle timeout (10 to 12 s)
 *   closes it: no handler sees either, so neither can be given RFC 9112 3.2's 400 (nor does uWS answer any
 *   HTTP/1.0 request, with a Host or without: no handler runs for a request line that does not say HTTP/1.1, so
 *   not even a 505 can be written, and each waits for the idle timeout, about 10 s, which closes it unanswered);
 * - closes it likewise on a request with both `Content-Length` and `Transfer-Encoding`;
 * - reads any `Transfer-Encoding` as chunked (`gzip, chunked` reached the routes with the chunks undone and the
 *   gzip not), and closes the connection when the bytes after the head are not chunks;
 * - sends `100 Continue` itself for `Expect: 100-continue` spelt in lower case, and ignores any other `Expect`.
 * What a handler can see is checked here: a transfer coding other than chunked (400) and an expectation other
 * than 100-continue (417).
 */
import type { HttpRequest, HttpResponse, TemplatedApp, WebSocketBehavior } from '@trufflesuite/uws-js-unofficial';
import { otherCoding } from '../../platform/codings.js';
import { errorBody, HTTP_ERRORS, type MessagingHttpError } from './errors.js';
import { closeWithoutBody, headerLists, statusLine } from './http.js';

/** A refusal: the catalog error and its `error_detail`. */
export interface FramingRefusal {
  error: MessagingHttpError;
  detail: string;
}

/** Whether every member of an `Expect` list is 100-continue (RFC 9110 10.1.1: compared without regard to case). */
const onlyContinue = (expect: string) => expect.split(',').every((m) => ['', '100-continue'].includes(m.trim().toLowerCase()));

/**
 * The refusal of a request's framing, or null. A transfer coding other than chunked is answered before the
 * expectation: the body that follows cannot be read either way. `Expect: 100-Continue` in another case is met
 * without an interim answer (uWS writes its `100 Continue` for the lower-case spelling only, and its response
 * object has no way to write one): the client sends its body once its wait for the 100 is over, as RFC 9110
 * 10.1.1 has it do.
 */
export function framingRefusal(req: HttpRequest): FramingRefusal | null {
  const lists = headerLists(req, ['transfer-encoding', 'expect']);
  const transfer = otherCoding(lists['transfer-encoding'], 'chunked');
  if (transfer !== null) {
    return { error: HTTP_ERRORS.badRequest, detail: `Transfer-Encoding ${transfer} is not supported: chunked is the only transfer coding taken` };
  }
  const expect = lists.expect;
  if (expect !== undefined && !onlyContinue(expect)) return { error: HTTP_ERRORS.expectationFailed, detail: `Expect: ${expect.slice(0, 64)}` };
  return null;
}

/**
 * Answers a refusal in the Messaging API's error shape, with the CORS header of its every answer, and closes the
 * connection: the body, if any, is not read, and would otherwise be parsed as the next request (RFC 9112 6.3: a
 * body whose length cannot be known is answered 400 and the connection closed). A HEAD's too, its answer without
 * a body (`closeWithoutBody`): a HEAD may carry a body as well, and uWS reads any `Transfer-Encoding` as chunked, so
 * a `0` chunk sent after a refused `Transfer-Encoding: gzip` ended that body and the bytes after it were served
 * as a request.
 */
function refuse(res: HttpResponse, req: HttpRequest, refusal: FramingRefusal): void {
  const head = req.getMethod().toLowerCase() === 'head';
  const body = errorBody(refusal.error, refusal.detail);
  res.cork(() => {
    res.writeStatus(statusLine(refusal.error.status)).writeHeader('content-type', 'application/json').writeHeader('access-control-allow-origin', '*');
    if (head) closeWithoutBody(res, body);
    else res.end(body, true);
  });
}

type Handler<A extends unknown[]> = (res: HttpResponse, req: HttpRequest, ...rest: A) => void | Promise<void>;

/** `handler`, run unless the request's framing is refused (`framingRefusal`), which is then answered. */
export function checkFraming<A extends unknown[]>(handler: Handler<A>): Handler<A> {
  return (res, req, ...rest) => {
    const refusal = framingRefusal(req);
    if (refusal) return refuse(res, req, refusal);
    return handler(res, req, ...rest);
  };
}

/** The app's methods that register an HTTP route (`get`, `post`, ...: each takes a pattern and a handler). */
const ROUTE_METHODS = new Set(['get', 'post', 'options', 'del', 'patch', 'put', 'head', 'connect', 'trace', 'any']);

/**
 * The app with `checkFraming` around every handler registered on it, the WebSocket upgrade's included: every
 * route, those of later mounts too, without each remembering to. Its other methods (`listen`, ...) are the app's.
 */
export function framingChecked(app: TemplatedApp): TemplatedApp {
  const checked: TemplatedApp = new Proxy(app, {
    get(target, name) {
      const value: unknown = Reflect.get(target, name);
      if (typeof value !== 'function') return value;
      if (typeof name === 'string' && ROUTE_METHODS.has(name)) {
        return (pattern: string, handler: Handler<[]>) => {
          value.call(target, pattern, checkFraming(handler));
          return checked;
        };
      }
      if (name === 'ws') {
        return (pattern: string, behavior: WebSocketBehavior<unknown>) => {
          const upgrade = behavior.upgrade;
          value.call(target, pattern, upgrade ? Object.assign({}, behavior, { upgrade: checkFraming(upgrade) }) : behavior);
          return checked;
        };
      }
      return value.bind(target);
    },
  });
  return checked;
}
