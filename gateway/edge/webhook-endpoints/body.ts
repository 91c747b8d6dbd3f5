import { z } from 'zod';
import { EVENT_TYPES } from '../../../actors/delivery/mod.js';

/** The most custom headers an endpoint may have. */
export const MAX_HEADERS = 20;
/** The longest custom header value. */
export const MAX_HEADER_VALUE = 1024;

/**
 * Header names an endpoint may not set: hop-by-hop headers (they describe one connection, not the message),
 * what the delivery itself decides (host, length, type, agent, expect) and the signature headers, which a
 * receiver must be able to trust.
 */
export const RESERVED_HEADERS = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'trailers', 'transfer-encoding', 'upgrade',
  'host', 'content-length', 'content-type', 'content-encoding', 'expect', 'user-agent',
  'x-service-timestamp', 'x-service-signature', 'x-service-event-id', 'webhook-id', 'webhook-timestamp', 'webhook-signature',
]);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/;
const VALUE = /^[\t\x20-\x7e]*$/;

const NAME = 'name must be between 1 and 128 characters';
const TIMEOUT = 'timeout_ms must be an integer from 1000 to 30000';
const EVENTS = `event_types must be a non-empty array of distinct values among ${EVENT_TYPES.join(', ')}`;

const name = z.string({ error: NAME }).min(1, NAME).max(128, NAME);
const url = z.string({ error: 'url must be a string' });
const eventTypes = z
  .array(z.enum(EVENT_TYPES, { error: `each event type must be one of ${EVENT_TYPES.join(', ')}` }), { error: EVENTS })
  .min(1, EVENTS)
  .refine((a) => new Set(a).size === a.length, EVENTS);
const timeoutMs = z.number({ error: TIMEOUT }).int(TIMEOUT).min(1000, TIMEOUT).max(30_000, TIMEOUT);
const enabled = z.boolean({ error: 'enabled must be a boolean' });

/**
 * Custom headers: an object of names to string values, at most `MAX_HEADERS`, names HTTP tokens and not
 * reserved (any case), no name twice in different cases, values of printable ASCII up to `MAX_HEADER_VALUE`.
 * Stored with names in lower case.
 */
const headers = z
  .record(z.string(), z.string({ error: 'header values must be strings' }), { error: 'headers must be an object of header names to string values' })
  .superRefine((h, ctx) => {
    const names = Object.keys(h);
    if (names.length > MAX_HEADERS) ctx.addIssue({ code: 'custom', message: `at most ${MAX_HEADERS} headers` });
    const seen = new Set<string>();
    for (const n of names) {
      const lower = n.toLowerCase();
      if (!TOKEN.test(n)) ctx.addIssue({ code: 'custom', path: [n], message: 'header name must be an HTTP token' });
      else if (RESERVED_HEADERS.has(lower)) ctx.addIssue({ code: 'custom', path: [n], message: `${lower} is set by the delivery and cannot be configured` });
      else if (seen.has(lower)) ctx.addIssue({ code: 'custom', path: [n], message: 'header given twice' });
      seen.add(lower);
      const v = h[n];
      if (typeof v === 'string' && (v.length > MAX_HEADER_VALUE || !VALUE.test(v))) {
        ctx.addIssue({ code: 'custom', path: [n], message: `header value must be printable ASCII of at most ${MAX_HEADER_VALUE} characters` });
      }
    }
  })
  .transform((h) => Object.fromEntries(Object.entries(h).map(([n, v]) => [n.toLowerCase(), v])));

/** `POST /v1/webhook-endpoints`. */
export const CreateEndpointBody = z
  .object({
    name,
    url,
    event_types: eventTypes,
    headers: headers.default({}),
    timeout_ms: timeoutMs.default(5000),
    enabled: enabled.default(true),
  })
  .strict();

/** `PATCH /v1/webhook-endpoints/{id}`: any of the fields, flat; only those given change. */
export const UpdateEndpointBody = z
  .object({ name, url, event_types: eventTypes, headers, timeout_ms: timeoutMs, enabled })
  .partial()
  .strict();
