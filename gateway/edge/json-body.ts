import type { FastifyRequest } from 'fastify';
import secureJsonParse from 'secure-json-parse';
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
