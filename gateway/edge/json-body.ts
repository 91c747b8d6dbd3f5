import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import secureJsonParse from 'secure-json-parse';
import { EDGE } from '../../platform/errors.js';
import { jsonTooDeep, tooDeepMessage } from '../../platform/json-depth.js';
import { unstorableJson } from '../../platform/json-unstorable.js';
import { utf8 } from '../../platform/utf8.js';

/**
 * JSON bodies: invalid UTF-8 is refused (JSON is UTF-8, RFC 8259), an empty body reads as no body and a literal `null` body is refused (clients often send `Content-Type: application/json` on a
 * POST without one), `__proto__`/`constructor.prototype` keys are refused, as Fastify's own parser does, and so
 * is anything nested deeper than `JSON_MAX_DEPTH` (checked on the raw text, before parsing) and any value that
 * would not be stored as sent (`unstorableJson`: a lone surrogate escape, a number past a double's range).
 * Every refusal is a 400, which each family renders in its own error shape.
 */
export function jsonBodyParser(_req: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void): void {
  const text = typeof body === 'string' ? body : utf8(body);
  if (text === null) return done(Object.assign(new Error('body is not valid UTF-8'), { statusCode: 400 }));
  if (text.trim() === '') return done(null, undefined);
  if (jsonTooDeep(text)) return done(Object.assign(new Error(`body ${tooDeepMessage()}`), { statusCode: 400 }));
  let value: unknown;
  try {
    value = secureJsonParse.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    return done(Object.assign(new Error(`body is not valid JSON: ${(err as Error).message}`), { statusCode: 400 }));
  }
  // Validation cannot tell a JSON null from an absent body (Fastify passes both as null), so refuse it here.
  if (value === null) return done(Object.assign(new Error('body must be a JSON object, not null'), { statusCode: 400 }));
  const unstorable = unstorableJson(text, value);
  if (unstorable !== null) return done(Object.assign(new Error(`body ${unstorable}`), { statusCode: 400 }));
  done(null, value);
}

/**
 * The root's parser of every body the JSON parser does not take (another type, or none): refused as
 * `EDGE_CONTENT_TYPE_UNSUPPORTED` unless it is empty, as an empty body counts as none (docs/choices.md)
 * however it is framed and labelled. Fastify skips parsing a request without a type whose headers announce
 * no body, but hands this one with a type and `Content-Length: 0`, and any chunked one: `POST .../merge` with
 * `Transfer-Encoding: chunked` and a bare `0\r\n\r\n` is served as with `Content-Length: 0`. A body that is
 * not empty is refused at once when its length is announced, else at its first byte (the rest is not read;
 * the connection closes). On a path no route has, nothing is refused: the answer is the 404.
 */
export function notJsonBodyParser(req: FastifyRequest, payload: Readable, done: (err: Error | null, body?: unknown) => void): void {
  if (req.is404) return done(null, undefined);
  const refused = () => EDGE.CONTENT_TYPE_UNSUPPORTED(req.headers['content-type'] ?? 'none');
  if (req.headers['transfer-encoding'] === undefined) return Number(req.headers['content-length'] ?? 0) === 0 ? done(null, undefined) : done(refused());
  const settle = (err: Error | null) => {
    payload.off('data', onData).off('end', onEnd).off('error', settle);
    done(err, undefined);
  };
  const onData = (chunk: Buffer) => {
    if (chunk.length > 0) settle(refused());
  };
  const onEnd = () => settle(null);
  payload.on('data', onData).on('end', onEnd).on('error', settle);
}
