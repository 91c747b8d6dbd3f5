import type { FastifyRequest } from 'fastify';
import secureJsonParse from 'secure-json-parse';

/**
 * JSON bodies: an empty body reads as no body and a literal `null` body is refused (clients often send `Content-Type: application/json` on a
 * POST without one), and `__proto__`/`constructor.prototype` keys are refused, as Fastify's own parser does.
 */
export function jsonBodyParser(_req: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void): void {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (text.trim() === '') return done(null, undefined);
  let value: unknown;
  try {
    value = secureJsonParse.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    return done(Object.assign(new Error(`body is not valid JSON: ${(err as Error).message}`), { statusCode: 400 }));
  }
  // Validation cannot tell a JSON null from an absent body (Fastify passes both as null), so refuse it here.
  if (value === null) return done(Object.assign(new Error('body must be a JSON object, not null'), { statusCode: 400 }));
  done(null, value);
}
