import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { otherCoding } from '../../platform/codings.js';
import { EDGE } from '../../platform/errors.js';

/** Whether a request's headers announce a body (HTTP/1.1: a non-zero `Content-Length`, or chunked). */
export function hasBody(headers: IncomingHttpHeaders): boolean {
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
}

/**
 * A `preParsing` hook, at the root so that every family has it: a body with a content coding other than
 * identity (`Content-Encoding: gzip`), or a transfer coding other than chunked (`Transfer-Encoding: gzip,
 * chunked`, which Node's parser lets through with the chunks undone), is refused before it is read. The edge
 * undoes no coding, and a gzip body was refused as "not valid UTF-8" while a plain one labelled `br` was taken
 * as if unlabelled. 400, not RFC 9110's 415 (nor RFC 9112's 501 for a transfer coding): the contract's error
 * tables list neither, as for a `Content-Type` not taken. After the credentials (`onRequest`), as every body
 * check is; a path no route has is left to its 404.
 */
export function refuseCodings(request: FastifyRequest, _reply: FastifyReply, _payload: unknown, done: (err?: Error | null) => void): void {
  const headers = request.headers;
  if (request.is404 || !hasBody(headers)) return done();
  const content = otherCoding(headers['content-encoding'], 'identity');
  if (content !== null) return done(EDGE.CONTENT_ENCODING_UNSUPPORTED(content));
  const transfer = otherCoding(headers['transfer-encoding'], 'chunked');
  if (transfer !== null) return done(EDGE.TRANSFER_ENCODING_UNSUPPORTED(transfer));
  done();
}
