import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Runtime } from '../../actors/mod.js';
import { CALL_ENCRYPTIONS, CALL_KIND, DEFAULT_CALL_ENCRYPTION, outboundCallRecords, type CallEncryption, type CallReply, type CallRequest } from '../../actors/call/mod.js';
import { OUTBOUND, PlatformError } from '../../platform/errors.js';
import { isSupportedCountry, toE164 } from '../../platform/phone-numbers.js';
import { randomBase62 } from '../../platform/secrets.js';
import type { Services } from '../../platform/services.js';
import type { Connector } from '../../tenancy/connectors.js';
import { credentialsFirst, header } from './auth.js';
import { useErrorShape } from './errors.js';

/** Contract 8: the metadata's base64 form must be under 26 KB. */
export const METADATA_MAX_BASE64 = 26 * 1024;
/** `OUT-` and an opaque id (addendum); ours are 24 base62 characters. Anything else is an invalid call sid (400). */
const CALL_SID = /^OUT-[A-Za-z0-9_-]{1,92}$/;
/** RFC 3261 `token`: what a header name may be. */
const SIP_TOKEN = /^[A-Za-z0-9\-.!%*_+`'~]{1,128}$/;
/** Headers the dialog layer writes itself: a metadata key with one of these names would corrupt the INVITE. */
const RESERVED_HEADERS = new Set(
  ['via', 'from', 'to', 'call-id', 'cseq', 'contact', 'max-forwards', 'content-length', 'content-type', 'route', 'record-route',
    'authorization', 'proxy-authorization', 'www-authenticate', 'proxy-authenticate', 'expires', 'require', 'proxy-require', 'supported',
    'allow', 'content-encoding', 'content-disposition', 'refer-to', 'referred-by', 'replaces', 'session-expires', 'min-se', 'rack', 'rseq',
    'v', 'f', 't', 'i', 'm', 'l', 'c', 'k', 'e', 's', 'r', 'b', 'o', 'u', 'x', 'y'],
);
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;

const ErrorBody = z.object({ error_message: z.string() });
const TriggerBody = z.object({
  to_number: z.string().describe('E.164, or a national-format number when country_code is given'),
  country_code: z.string().optional().describe('ISO 3166-1 alpha-2; only to parse a non-E.164 number'),
  metadata: z.record(z.string(), z.string()).optional().describe('string values only; base64 form under 26 KB; each key sent as a SIP header'),
  encryption: z.enum(CALL_ENCRYPTIONS).optional().describe('default TLS/SRTP'),
});
const StatusBody = z.object({ status: z.enum(['queued', 'calling', 'success', 'failure']), reason: z.string() });

/** A trigger's body, checked: every problem is a 400 of the catalog (contract 7.3). */
export interface OutboundBody {
  to: string;
  headers: Record<string, string>;
  encryption: CallEncryption;
}

/** Validates `POST /v1/outbound-calling`'s body; throws the `OUTBOUND_` error of the first problem. */
export function parseOutboundBody(body: unknown): OutboundBody {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw OUTBOUND.BODY_INVALID();
  const b = body as Record<string, unknown>;
  let country: string | undefined;
  if (b.country_code !== undefined) {
    if (typeof b.country_code !== 'string' || !/^[A-Za-z]{2}$/.test(b.country_code) || !isSupportedCountry(b.country_code.toUpperCase() as never)) {
      throw OUTBOUND.COUNTRY_CODE_INVALID();
    }
    country = b.country_code.toUpperCase();
  }
  if (typeof b.to_number !== 'string' || b.to_number.trim() === '') throw OUTBOUND.TO_NUMBER_REQUIRED();
  const to = toE164(b.to_number, country);
  if (!to) throw OUTBOUND.TO_NUMBER_INVALID();
  const headers: Record<string, string> = {};
  if (b.metadata !== undefined) {
    if (typeof b.metadata !== 'object' || b.metadata === null || Array.isArray(b.metadata)) throw OUTBOUND.METADATA_NOT_OBJECT();
    // SIP header names are case-insensitive: two keys differing in case would be one header sent twice.
    const names = new Set<string>();
    for (const [key, value] of Object.entries(b.metadata)) {
      if (typeof value !== 'string') throw OUTBOUND.METADATA_NOT_STRING(JSON.stringify(key));
      if (!SIP_TOKEN.test(key)) throw OUTBOUND.METADATA_KEY_INVALID(JSON.stringify(key));
      if (RESERVED_HEADERS.has(key.toLowerCase())) throw OUTBOUND.METADATA_KEY_RESERVED(JSON.stringify(key));
      if (names.has(key.toLowerCase())) throw OUTBOUND.METADATA_KEY_REPEATED(JSON.stringify(key));
      names.add(key.toLowerCase());
      if (CONTROL.test(value)) throw OUTBOUND.METADATA_VALUE_INVALID(JSON.stringify(key));
      Object.defineProperty(headers, key, { value, enumerable: true, writable: true, configurable: true });
    }
    if (Buffer.from(JSON.stringify(b.metadata), 'utf8').toString('base64').length >= METADATA_MAX_BASE64) throw OUTBOUND.METADATA_TOO_LARGE(METADATA_MAX_BASE64);
  }
  let encryption: CallEncryption = DEFAULT_CALL_ENCRYPTION;
  if (b.encryption !== undefined) {
    if (typeof b.encryption !== 'string' || !(CALL_ENCRYPTIONS as readonly string[]).includes(b.encryption)) throw OUTBOUND.ENCRYPTION_INVALID(CALL_ENCRYPTIONS.join(', '));
    encryption = b.encryption as CallEncryption;
  }
  return { to, headers, encryption };
}

export interface OutboundOptions {
  services: Services;
  runtime: Runtime;
}

/**
 * Outbound calling (contract 4.5): `POST /v1/outbound-calling` places a call and answers its `call_sid` at
 * once (the call actor queues and dials it); `GET /v1/outbound-calling/{call_sid}/status` reads its status
 * record. Both authenticate with `X-Service-Auth-Token`, the token of an admin connector of kind `outbound`
 * (hash compared in constant time by `tenancy/`); errors are `{error_message}` (catalog `OUTBOUND_`).
 */
export const outboundPlugin: FastifyPluginAsync<OutboundOptions> = async (root, { services, runtime }) => {
  const app = root.withTypeProvider<ZodTypeProvider>();
  useErrorShape(app, 'error_message');
  const records = outboundCallRecords(services.store);

  /** The outbound connector the request's token belongs to. */
  const authorize = async (req: FastifyRequest): Promise<Connector> => {
    const token = header(req, 'x-service-auth-token');
    if (!token) throw OUTBOUND.TOKEN_MISSING();
    const connector = await services.connectors.verify(token);
    if (!connector) throw OUTBOUND.TOKEN_INVALID();
    if (connector.kind !== 'outbound') throw OUTBOUND.NOT_OUTBOUND();
    req.tenant = connector;
    return connector;
  };
  const credentials = credentialsFirst(authorize);
  app.addHook('onRequest', credentials.hook);

  app.post('/v1/outbound-calling', {
    schema: {
      tags: ['outbound'],
      summary: 'Place an outbound call; answers its call_sid at once (poll the status every 2 to 5 s)',
      body: z.unknown(),
      response: { 200: z.object({ call_sid: z.string() }), 400: ErrorBody, 401: ErrorBody, 500: ErrorBody },
    },
    config: { openapiBody: TriggerBody },
  }, async (req) => {
    const connector = credentials.of(req);
    if (!connector.telephony_connector_id || !connector.from_number) throw OUTBOUND.NOT_OUTBOUND();
    const body = parseOutboundBody(req.body);
    const trunk = await services.builder.telephony.connectorById(connector.telephony_connector_id);
    if (!trunk || trunk.account_id !== connector.account_id || trunk.agent_id !== connector.project_id) throw OUTBOUND.NOT_OUTBOUND();
    const callSid = `OUT-${randomBase62(24)}`;
    const request: CallRequest = {
      account_id: connector.account_id,
      project_id: connector.project_id,
      environment: connector.environment,
      variant_id: connector.variant_id,
      connector_id: connector.id,
      telephony_connector_id: trunk.id,
      to: body.to,
      from: connector.from_number,
      headers: body.headers,
      encryption: body.encryption,
    };
    req.log = req.log.child({ call_sid: callSid });
    try {
      await runtime.client.ask<CallReply>(CALL_KIND, callSid, { type: 'PLACE', request: request as unknown as Record<string, unknown>, at: Date.now() });
    } catch (err) {
      req.log.error({ err }, 'placing an outbound call failed');
      throw OUTBOUND.PLACE_FAILED();
    }
    return { call_sid: callSid };
  });

  app.get('/v1/outbound-calling/:call_sid/status', {
    schema: {
      tags: ['outbound'],
      summary: 'Status of an outbound call: queued, calling, success or failure (with a reason); 404 about 2 hours after it ended',
      params: z.object({ call_sid: z.string() }),
      response: { 200: StatusBody, 400: ErrorBody, 401: ErrorBody, 404: ErrorBody, 500: ErrorBody },
    },
  }, async (req) => {
    const connector = credentials.of(req);
    if (!CALL_SID.test(req.params.call_sid)) throw OUTBOUND.CALL_SID_INVALID();
    const record = await records.get(req.params.call_sid).catch((err: unknown) => {
      if (err instanceof PlatformError) throw err;
      req.log.error({ err }, 'reading an outbound call status failed');
      throw OUTBOUND.STATUS_FAILED();
    });
    if (!record || record.account_id !== connector.account_id || record.project_id !== connector.project_id) throw OUTBOUND.CALL_NOT_FOUND();
    if (record.status === 'expired' || (record.retain_until !== null && record.retain_until <= Date.now())) throw OUTBOUND.CALL_NOT_FOUND();
    return { status: record.status, reason: record.reason };
  });
};
