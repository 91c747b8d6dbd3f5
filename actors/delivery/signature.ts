import { createHmac, randomBytes } from 'node:crypto';

/** The prefix of a signing secret: the Standard Webhooks secret format, `whsec_<base64 key>`. */
export const SECRET_PREFIX = 'whsec_';

/** A new signing secret: 32 random bytes in the Standard Webhooks format `whsec_<base64>`. */
export function newSigningSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** The signature headers of one attempt. */
export interface SignatureHeaders {
  'x-service-timestamp': string;
  'x-service-signature': string;
  'x-service-event-id': string;
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * Signs one attempt twice with the one `signing_secret` string, so a receiver can verify either header set:
 *
 * - `X-Service-Signature`: lowercase hex HMAC-SHA256 of `{timestamp}.{body}`, keyed with the signing secret
 *   exactly as it was shown (its UTF-8 bytes, `whsec_` prefix included): what `createHmac('sha256',
 *   signing_secret)` does with the string a client was given.
 * - `webhook-signature`: `v1,<base64 HMAC-SHA256 of {id}.{timestamp}.{body}>` keyed with the base64-decoded
 *   part after `whsec_`, as the Standard Webhooks specification (and its libraries, given the same string)
 *   do.
 *
 * `timestampS` is unix seconds; both timestamps carry it.
 */
export function signatureHeaders(secret: string, eventId: string, timestampS: number, body: string): SignatureHeaders {
  const ts = String(timestampS);
  const service = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${ts}.${body}`, 'utf8').digest('hex');
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  const standard = createHmac('sha256', key).update(`${eventId}.${ts}.${body}`, 'utf8').digest('base64');
  return {
    'x-service-timestamp': ts,
    'x-service-signature': service,
    'x-service-event-id': eventId,
    'webhook-id': eventId,
    'webhook-timestamp': ts,
    'webhook-signature': `v1,${standard}`,
  };
}
