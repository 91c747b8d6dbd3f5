import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import secureJsonParse from 'secure-json-parse';
import { z } from 'zod';
import { ActorAskError, type Runtime } from '../../actors/mod.js';
import {
  bridgeEnded,
  conversationOwner,
  deleteExternalWait,
  externalEventKey,
  externalEventOf,
  externalEventRecords,
  externalWaitRecords,
  MAX_EXTERNAL_EVENT_ID,
  type ConversationReply,
  type ExternalEventRecord,
} from '../../actors/conversation/mod.js';
import type { ConversationEvent } from '../../machines/conversation.js';
import { EXTERNAL_EVENTS, PlatformError, RateLimitedError } from '../../platform/errors.js';
import { JSON_MAX_DEPTH, jsonTooDeep } from '../../platform/json-depth.js';
import { unstorableJson } from '../../platform/json-unstorable.js';
import type { RateLimiter } from '../../platform/rate-limit.js';
import type { Services } from '../../platform/services.js';
import type { ApiKey } from '../../tenancy/keys.js';
import { credentialsFirst, header, resolvePathProject } from './auth.js';
import { utf8 } from '../../platform/utf8.js';
import { sendProblem, toProblem } from './errors.js';

/**
 * The External Events API (contract 4.8) and the bridge-ended notification (4.9), both authenticated with an
 * `X-Api-Key` of scope `external_events` bound to one project. Reference: `docs/external-events.md`.
 *
 * The webhook takes JSON, form, XML and plain-text bodies (each as a string, up to `maxBytes`), finds the
 * event id in the headers, the query string or the body, stores the body as it came (with its content type
 * and what was parsed of it), and hands it to the conversation of the key's project that waits for that id.
 */

export interface ExternalEventsOptions {
  services: Services;
  runtime: Runtime;
  /** The largest body the webhook takes, in bytes. */
  maxBytes: number;
  /** The family's per-project token buckets, shared with bridge-ended (`externalEventsLimiter`). */
  limiter: RateLimiter;
}

const LOCATIONS = ['headers', 'querystring', 'payload'] as const;

/**
 * The first value of header `name` (lower case) as it came on the wire. Node joins a repeated header's values
 * with ", " (`request.headers`), which as an event id would be neither value: "A, B" resumes no wait for A.
 */
function firstHeaderValue(raw: string[], name: string): string | undefined {
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) return raw[i + 1];
  return undefined;
}
type Location = (typeof LOCATIONS)[number];
/** The webhook's own query parameters. */
const OWN_PARAMS = ['event_id_location', 'event_id_path', 'account_id', 'project_id'] as const;
const MAX_PARAM = 256;
/**
 * Headers that carry credentials: never an event's id, which is stored, shown in the conversation's record and
 * handed to the project's functions (the webhook's own `X-Api-Key` would otherwise be kept as one).
 */
const CREDENTIAL_HEADERS = ['x-api-key', 'authorization', 'proxy-authorization', 'cookie'];
/** A name or dotted path of names (each without spaces or control characters). */
const PATH = /^[^.\s\x00-\x1f\x7f]+(?:\.[^.\s\x00-\x1f\x7f]+)*$/;
const CONTROL = /[\x00-\x1f\x7f]/;

type Kind = 'json' | 'form' | 'xml' | 'text' | 'none';
const MEDIA: Record<string, Kind> = {
  'application/json': 'json',
  'application/x-www-form-urlencoded': 'form',
  'application/xml': 'xml',
  'text/xml': 'xml',
  'text/plain': 'text',
};

const PREDEFINED: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };
const DECIMAL_REF = /^#[0-9]+$/;
const HEX_REF = /^#x[0-9A-Fa-f]+$/;

/** A character XML 1.0 allows (its `Char` production): no NUL, C0 control but tab and line breaks, surrogate, U+FFFE or U+FFFF. */
function xmlChar(code: number): boolean {
  if (code < 0x20) return code === 0x9 || code === 0xa || code === 0xd;
  if (code >= 0xd800 && code <= 0xdfff) return false;
  return code !== 0xfffe && code !== 0xffff && code <= 0x10ffff;
}

/** What a reference between `&` and `;` stands for, or null when XML has no such reference. */
function referenced(name: string): string | null {
  if (Object.hasOwn(PREDEFINED, name)) return PREDEFINED[name];
  const code = DECIMAL_REF.test(name) ? Number(name.slice(1)) : HEX_REF.test(name) ? parseInt(name.slice(2), 16) : NaN;
  return xmlChar(code) ? String.fromCodePoint(code) : null;
}

/**
 * XML's own escapes in a text or attribute value, decoded in one pass (so `&amp;#233;` reads `&#233;`): the five
 * predefined entities and character references. Any other `&` makes the document invalid (it throws): a reference
 * to an undeclared entity (a document with a DOCTYPE is refused before parsing, so none is declared) or to a
 * character XML does not allow (`&#xD800;`, `&#0;`). Kept as written, it would read as the escaped form of itself
 * (`&amp;#xD800;`), and two different event ids would be one.
 */
export function decodeXmlEscapes(value: string): string {
  let out = '';
  let from = 0;
  for (let at = value.indexOf('&'); at >= 0; at = value.indexOf('&', from)) {
    const end = value.indexOf(';', at);
    const char = end < 0 ? null : referenced(value.slice(at + 1, end));
    if (char === null) throw new Error(`not an XML reference at ${at}`);
    out += value.slice(from, at) + char;
    from = end + 1;
  }
  return from === 0 ? value : out + value.slice(from);
}

/**
 * The parser's entity decoder (its `entityDecoder` option): `decodeXmlEscapes`, which the parser calls on text and
 * attribute values and not on a CDATA section's content, which is text as written (`<![CDATA[&amp;]]>` is `&amp;`).
 * Declarations never come: a DOCTYPE is refused before parsing.
 */
const escapes = {
  decode: decodeXmlEscapes,
  reset: () => undefined,
  setXmlVersion: () => undefined,
  setExternalEntities: () => undefined,
  addInputEntities: () => {
    throw new Error('entity declarations are refused');
  },
};

/**
 * XML as data: attributes as `@name`, text next to attributes as `#text`, values as strings, XML's escapes
 * decoded (`decodeXmlEscapes`); no entity is ever expanded beyond those.
 */
const xml = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@',
  textNodeName: '#text',
  parseTagValue: false,
  parseAttributeValue: false,
  processEntities: true,
  entityDecoder: escapes,
  htmlEntities: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
});

const ErrorBody = z.object({ error_message: z.string() });

/**
 * The verified key, which must be of scope `external_events` (any other key is invalid here). Each request of
 * a verified key then costs a token of its project's bucket, before its body is looked at: a stored event is
 * kept for the retention whether or not a conversation takes it, so a leaked key or a sender's retry loop
 * could otherwise fill the disk, and every bridge-ended runs a function. Checked after the key, so a wrong
 * secret spends nobody's tokens.
 */
async function verifyKey(services: Services, limiter: RateLimiter, request: FastifyRequest): Promise<ApiKey> {
  const presented = header(request, 'x-api-key');
  if (!presented) throw EXTERNAL_EVENTS.API_KEY_MISSING();
  const key = await services.keys.verify(presented);
  if (!key || key.scope !== 'external_events' || !key.project_id) throw EXTERNAL_EVENTS.API_KEY_INVALID();
  request.tenant = key;
  const wait = limiter.take(key.project_id);
  if (wait) throw new RateLimitedError(EXTERNAL_EVENTS.RATE_LIMITED, wait);
  return key;
}

/** Every error in `{error_message}`, Fastify's own body errors in this family's words. */
function errorShape(app: FastifyInstance, maxBytes: number): void {
  app.setErrorHandler((err, request, reply) => {
    const code = (err as { code?: string }).code;
    let e: unknown = err;
    if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') e = EXTERNAL_EVENTS.BODY_TOO_LARGE(maxBytes);
    else if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') e = EXTERNAL_EVENTS.CONTENT_TYPE_UNSUPPORTED();
    else if (!(err instanceof PlatformError) && (err as { statusCode?: number }).statusCode === 400 && code?.startsWith('FST_ERR_CTP')) {
      e = EXTERNAL_EVENTS.BODY_MALFORMED('UTF-8');
    }
    return sendProblem(reply, 'error_message', toProblem(e, request));
  });
}

/**
 * Whether every `&`-separated part of a query string or form body decodes as percent-encoded UTF-8 (`+` a space).
 * `URLSearchParams` reads what does not (`%E9`, Latin-1) as U+FFFD and leaves a lone `%` as written (so `%25zz`
 * and `%zz` read alike): an event id would be stored as nobody sent it, and two different ids would be one.
 */
function percentDecodable(raw: string): boolean {
  for (const part of raw.split('&')) {
    try {
      decodeURIComponent(part.replace(/\+/g, ' '));
    } catch {
      return false;
    }
  }
  return true;
}

/** The raw query string's parameters (repeated keys keep every value); percent-encoding that is not UTF-8 is refused. */
function queryOf(url: string): URLSearchParams {
  const i = url.indexOf('?');
  const raw = i < 0 ? '' : url.slice(i + 1);
  if (!percentDecodable(raw)) throw EXTERNAL_EVENTS.QUERY_MALFORMED();
  return new URLSearchParams(raw);
}

function ownParam(q: URLSearchParams, name: (typeof OWN_PARAMS)[number]): string {
  const all = q.getAll(name);
  if (all.length === 0 || all[0] === '') throw EXTERNAL_EVENTS.PARAM_REQUIRED(name);
  if (all.length > 1) throw EXTERNAL_EVENTS.PARAM_REPEATED(name);
  if (all[0].length > MAX_PARAM) throw EXTERNAL_EVENTS.PARAM_TOO_LONG(name, MAX_PARAM);
  return all[0];
}

/** A value at a path: the whole path as one key first (`a.b` may be a key), else name by name. */
export function valueAt(data: unknown, path: string): unknown {
  const own = (o: unknown, k: string): unknown => {
    if (o === null || typeof o !== 'object') return undefined;
    if (Array.isArray(o)) return /^(?:0|[1-9]\d{0,8})$/.test(k) ? o[Number(k)] : undefined;
    return Object.hasOwn(o, k) ? (o as Record<string, unknown>)[k] : undefined;
  };
  const whole = own(data, path);
  if (whole !== undefined) return whole;
  let at: unknown = data;
  for (const name of path.split('.')) {
    at = own(at, name);
    if (at === undefined) return undefined;
  }
  return at;
}

/** A form body as data: each key once, a repeated key as the list of its values; percent-encoding that is not UTF-8 is refused. */
function formData(text: string): Record<string, string | string[]> {
  if (!percentDecodable(text)) throw EXTERNAL_EVENTS.BODY_MALFORMED('percent-encoded UTF-8');
  const entries = new Map<string, string | string[]>();
  for (const [k, v] of new URLSearchParams(text)) {
    const had = entries.get(k);
    entries.set(k, had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v]);
  }
  // fromEntries defines own properties: a `__proto__` key is data, never a prototype.
  return Object.fromEntries(entries);
}

/** Parses the body for its content type; every refusal is a 400 (a type not taken too: contract 7.3 has no 415). */
function parseBody(kind: Kind, text: string): unknown {
  if (text.trim() === '') return null;
  switch (kind) {
    case 'none':
      throw EXTERNAL_EVENTS.CONTENT_TYPE_UNSUPPORTED();
    case 'text':
      return text;
    case 'form':
      return formData(text);
    case 'json': {
      if (jsonTooDeep(text)) throw EXTERNAL_EVENTS.BODY_TOO_DEEP(JSON_MAX_DEPTH);
      let data: unknown;
      try {
        data = secureJsonParse.parse(text, undefined, { protoAction: 'remove', constructorAction: 'remove' });
      } catch {
        throw EXTERNAL_EVENTS.BODY_MALFORMED('JSON');
      }
      // A lone surrogate or an infinite number would be stored as something else: two different ids read as one.
      if (unstorableJson(text, data)) throw EXTERNAL_EVENTS.BODY_MALFORMED('JSON that can be stored as sent (I-JSON)');
      return data;
    }
    case 'xml': {
      // No DOCTYPE at all: no internal subset, so no entity declarations to expand (billion laughs, XXE).
      if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw EXTERNAL_EVENTS.XML_DOCTYPE_REFUSED();
      let data: unknown;
      try {
        if (XMLValidator.validate(text) !== true) throw new Error('invalid');
        data = xml.parse(text);
      } catch {
        throw EXTERNAL_EVENTS.BODY_MALFORMED('XML');
      }
      // What is stored and handed to the function is JSON-shaped data of bounded depth.
      let json: string;
      try {
        json = JSON.stringify(data);
      } catch {
        throw EXTERNAL_EVENTS.BODY_TOO_DEEP(JSON_MAX_DEPTH);
      }
      if (jsonTooDeep(json)) throw EXTERNAL_EVENTS.BODY_TOO_DEEP(JSON_MAX_DEPTH);
      return data;
    }
  }
}

/** An event id as found: a string, or a number written as JSON writes it; anything else is invalid. */
function eventIdOf(value: unknown): string {
  const id = typeof value === 'string' ? value : typeof value === 'number' && Number.isFinite(value) ? String(value) : null;
  if (id === null || id === '' || id.length > MAX_EXTERNAL_EVENT_ID || CONTROL.test(id)) throw EXTERNAL_EVENTS.EVENT_ID_INVALID(MAX_EXTERNAL_EVENT_ID);
  return id;
}

/** Keeps store and actor failures apart from the request's own faults: they are transient, 500, retry. */
async function transient<T>(work: () => Promise<T>, log: FastifyRequest['log']): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof PlatformError) throw err;
    log.warn({ err }, 'external event not processed');
    throw EXTERNAL_EVENTS.TRANSIENT();
  }
}

/** `POST /v1/external-events/webhook` (contract 4.8). */
export const externalEventsPlugin: FastifyPluginAsync<ExternalEventsOptions> = async (app, { services, runtime, maxBytes, limiter }) => {
  errorShape(app, maxBytes);
  const credentials = credentialsFirst((req) => verifyKey(services, limiter, req));
  app.addHook('onRequest', credentials.hook);
  // Every body as a string (the root takes JSON only); the route decides what it accepts.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: maxBytes }, (_req, body, done) => {
    const text = utf8(body as Buffer);
    if (text === null) done(EXTERNAL_EVENTS.BODY_MALFORMED('UTF-8'));
    else done(null, text);
  });
  const events = externalEventRecords(services.store);
  const waits = externalWaitRecords(services.store);

  app.post('/v1/external-events/webhook', {
    bodyLimit: maxBytes,
    config: {
      openapiQuery: z.object({
        event_id_location: z.enum(LOCATIONS).describe('Where the external event id is: a header, a query parameter, or the body'),
        event_id_path: z.string().max(256).describe('Name or dotted path of the id there (payment.ref, items.0.id, order.@id)'),
        account_id: z.string().describe('Account id or slug'),
        project_id: z.string().describe('Project (agent) id or slug'),
      }),
      openapiBody: z.string().describe('The event, stored as sent (at most EXTERNAL_EVENT_MAX_BYTES)'),
    },
    schema: {
      tags: ['external events'],
      consumes: ['application/json', 'application/x-www-form-urlencoded', 'application/xml', 'text/plain'],
      summary: 'Deliver an external event to the conversation waiting for its id',
      response: {
        201: z.object({
          id: z.string(),
          event_id: z.string(),
          content_type: z.string(),
          received_at: z.string(),
          conversation_id: z.string().nullable(),
          status: z.enum(['delivered', 'queued']),
          duplicate: z.boolean(),
        }),
        400: ErrorBody,
        401: ErrorBody,
        429: ErrorBody,
        500: ErrorBody,
      },
    },
  }, async (req, reply) => {
    const key = credentials.of(req);
    const q = queryOf(req.url);
    const [location, path, accountParam, projectParam] = OWN_PARAMS.map((n) => ownParam(q, n));
    if (!(LOCATIONS as readonly string[]).includes(location)) throw EXTERNAL_EVENTS.LOCATION_INVALID();
    if (!PATH.test(path)) throw EXTERNAL_EVENTS.PATH_INVALID();
    // The key is bound to one account and project; the query must name them (id or slug form).
    const resolved = await resolvePathProject(services, key.id, accountParam, projectParam).catch((err) => {
      if (err instanceof PlatformError && err.statusCode === 404) return null;
      throw err;
    });
    if (!resolved || resolved.account.id !== key.account_id || resolved.project.id !== key.project_id) throw EXTERNAL_EVENTS.API_KEY_OTHER_PROJECT();
    const projectId = resolved.project.id;

    const rawType = header(req, 'content-type') ?? '';
    const media = rawType.split(';')[0].trim().toLowerCase();
    const text = typeof req.body === 'string' ? req.body : '';
    const kind: Kind = MEDIA[media] ?? (media === '' && text === '' ? 'text' : 'none');
    if (kind === 'none') throw EXTERNAL_EVENTS.CONTENT_TYPE_UNSUPPORTED();
    const data = parseBody(kind, text);

    let found: unknown;
    const where = location as Location;
    if (where === 'headers') {
      const name = path.toLowerCase();
      if (CREDENTIAL_HEADERS.includes(name)) throw EXTERNAL_EVENTS.PATH_CREDENTIAL(CREDENTIAL_HEADERS.join(', '));
      found = firstHeaderValue(req.raw.rawHeaders, name);
    }
    else if (where === 'querystring') {
      if ((OWN_PARAMS as readonly string[]).includes(path)) throw EXTERNAL_EVENTS.PATH_INVALID();
      found = q.get(path) ?? undefined;
    } else if (kind === 'text') found = text.trim() === '' ? undefined : text.trim();
    else found = data === null ? undefined : valueAt(data, path);
    if (found === undefined || found === null) throw EXTERNAL_EVENTS.EVENT_ID_NOT_FOUND(where, path);
    const eventId = eventIdOf(found);

    const id = externalEventKey(projectId, eventId);
    const receipt = randomUUID();
    const stored = await transient(async () => {
      const fresh: Omit<ExternalEventRecord, 'id'> & { receipt: string } = {
        account_id: key.account_id,
        project_id: projectId,
        event_id: eventId,
        content_type: kind === 'text' && media === '' ? 'text/plain' : media,
        body: text,
        data: kind === 'text' ? null : data,
        received_at: new Date().toISOString(),
        conversation_id: null,
        delivered_at: null,
        receipt,
      };
      // The first delivery of an id is kept; a later one (a retry) finds it and is not stored again. Two at
      // once may both try to insert: the one refused as a duplicate reads the other's.
      try {
        return (await events.update({ id }, { $setOnInsert: fresh }, { upsert: true })) as ExternalEventRecord & { receipt: string };
      } catch (err) {
        const existing = await events.get(id);
        if (!existing) throw err;
        return existing as ExternalEventRecord & { receipt: string };
      }
    }, req.log);
    const duplicate = stored.receipt !== receipt;

    // Hand it to the conversation of this project that waits for this id, if any (else it waits for the wait).
    const wait = await transient(() => waits.get(id), req.log);
    let delivered = stored.conversation_id !== null && stored.delivered_at !== null;
    let conversationId = stored.conversation_id;
    // An event is for one conversation: once one took it, a repeat goes to that one only (which ignores it).
    if (wait && wait.project_id === projectId && (!delivered || stored.conversation_id === wait.conversation_id)) {
      const event: ConversationEvent = { type: 'EXTERNAL_EVENT', event: externalEventOf(stored) };
      const r = await transient(async () => {
        try {
          return await runtime.client.ask<ConversationReply>('conversation', wait.conversation_id, event, { eventId: `external:${id}:${wait.conversation_id}` });
        } catch (err) {
          if (err instanceof ActorAskError) req.log.warn({ err }, 'external event: conversation did not answer');
          throw err;
        }
      }, req.log);
      if ('handled' in r && r.handled) {
        delivered = true;
        conversationId = wait.conversation_id;
        if (stored.conversation_id !== wait.conversation_id) {
          await transient(() => events.update({ id }, { $set: { conversation_id: wait.conversation_id, delivered_at: new Date().toISOString() } }), req.log);
        }
        // The wait is over (the answer is durable): its record goes. One left by a failure here goes with the sweep.
        await deleteExternalWait(services.store, wait).catch((err: unknown) => req.log.warn({ err }, 'external event: wait not deleted'));
      }
    }
    return reply.code(201).send({
      id,
      event_id: eventId,
      content_type: stored.content_type,
      received_at: stored.received_at,
      conversation_id: delivered ? conversationId : null,
      status: delivered ? 'delivered' : 'queued',
      duplicate,
    });
  });
};

export interface BridgeOptions {
  services: Services;
  runtime: Runtime;
  /** The family's per-project token buckets, shared with the webhook. */
  limiter: RateLimiter;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** `POST /internal/v1/agentic-dial/bridge-ended` (contract 4.9): 200 `{success: true, conversation_id, bridge_ended}`. */
export const bridgeEndedPlugin: FastifyPluginAsync<BridgeOptions> = async (app, { services, runtime, limiter }) => {
  app.setErrorHandler((err, request, reply) => sendProblem(reply, 'error_message', toProblem(err, request)));
  const credentials = credentialsFirst((req) => verifyKey(services, limiter, req));
  app.addHook('onRequest', credentials.hook);

  app.post('/internal/v1/agentic-dial/bridge-ended', {
    config: {
      openapiBody: z.object({ conversation_id: z.string(), bridge_duration_seconds: z.number(), call_duration_seconds: z.number() }),
    },
    schema: {
      tags: ['external events'],
      summary: 'A bridged call ended: runs the bridge_ended function and records it in the conversation state',
      response: {
        200: z.object({
          success: z.boolean(),
          conversation_id: z.string(),
          bridge_ended: z.object({ bridge_duration_seconds: z.number(), call_duration_seconds: z.number(), at: z.string() }),
        }),
        400: ErrorBody,
        401: ErrorBody,
        404: ErrorBody,
        429: ErrorBody,
        500: ErrorBody,
      },
    },
  }, async (req) => {
    const key = credentials.of(req);
    const body = req.body;
    if (!isObject(body)) throw EXTERNAL_EVENTS.BRIDGE_BODY_INVALID();
    const cid = body.conversation_id;
    if (typeof cid !== 'string' || cid === '' || cid.length > 128 || CONTROL.test(cid)) {
      throw EXTERNAL_EVENTS.BRIDGE_FIELD_INVALID('conversation_id', 'a string of 1 to 128 characters');
    }
    for (const f of ['bridge_duration_seconds', 'call_duration_seconds'] as const) {
      const v = body[f];
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw EXTERNAL_EVENTS.BRIDGE_FIELD_INVALID(f, 'a number of seconds, at least 0');
    }
    const bridge = { bridge_duration_seconds: body.bridge_duration_seconds as number, call_duration_seconds: body.call_duration_seconds as number };
    // From the journal (the record is a projection and may lag); another project's conversation is as unknown as a missing one.
    const owner = await transient(() => conversationOwner(services.store, cid), req.log);
    if (!owner || owner.projectId !== key.project_id || owner.accountId !== key.account_id) throw EXTERNAL_EVENTS.BRIDGE_CONVERSATION_NOT_FOUND();
    const r = await transient(
      () => bridgeEnded(runtime.client, cid, bridge),
      req.log,
    );
    if (!('bridge_ended' in r)) throw EXTERNAL_EVENTS.BRIDGE_CONVERSATION_NOT_FOUND();
    return { success: true, conversation_id: cid, bridge_ended: r.bridge_ended };
  });
};
