/**
 * What the OpenAPI document (`GET /openapi.json`, Swagger UI at `/docs`) says beyond the route schemas that
 * validate requests: the security scheme of each family, so that "Authorize" and "Try it out" send the
 * credentials each family reads, and the query parameters of the routes whose query strings are read by
 * hand (the Conversations and Concurrent Calls APIs parse theirs so that every problem is a 400 naming the
 * parameter; their validation schema is any string map, which documents nothing).
 */
import type { FastifySchema } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import type { ZodType } from 'zod';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Documentation only: the query parameters the route reads by hand, shown instead of its `querystring`. */
    openapiQuery?: ZodType;
    /** Documentation only: the body the route reads by hand, shown as its request body. */
    openapiBody?: ZodType;
    /** Documentation only: response schemas of answers the route sends as JSON text, by status. */
    openapiResponses?: Record<number, ZodType>;
  }
}

/**
 * Header names as the contract writes them (section 5): HTTP reads them case-insensitively, Swagger UI sends
 * them as named here.
 */
export const SECURITY_SCHEMES = {
  operatorToken: { type: 'http', scheme: 'bearer', description: 'Admin API: `Authorization: Bearer <OPERATOR_TOKEN>` (operator.md)' },
  agentsKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'Agents API: a key of scope `agents`' },
  conversationsKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'Conversations and Concurrent Calls APIs: a key of scope `conversations` for the project (list: with the `conversations_data` permission)' },
  chatKey: { type: 'apiKey', in: 'header', name: 'X-API-KEY', description: 'Chat API: a key of scope `chat` for the project' },
  chatToken: { type: 'apiKey', in: 'header', name: 'X-TOKEN', description: 'Chat API: the token of a `chat` connector of the project' },
  externalEventsKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key', description: 'External Events API and bridge-ended: a key of scope `external_events` for the project' },
  outboundToken: { type: 'apiKey', in: 'header', name: 'X-Service-Auth-Token', description: 'Outbound calling: the token of an `outbound` connector (with a telephony connector and a from number)' },
  alertsKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'Alerts API (alert rules, alerts, webhook endpoints): a key of scope `alerts` for the account' },
} as const;

/** Each family's credentials, by its operations' tag; all schemes of one entry are needed together. */
export const SECURITY_BY_TAG: Record<string, Array<Record<string, string[]>>> = {
  admin: [{ operatorToken: [] }],
  agents: [{ agentsKey: [] }],
  conversations: [{ conversationsKey: [] }],
  concurrency: [{ conversationsKey: [] }],
  chat: [{ chatKey: [], chatToken: [] }],
  'external events': [{ externalEventsKey: [] }],
  outbound: [{ outboundToken: [] }],
  webhooks: [{ alertsKey: [] }],
  alerts: [{ alertsKey: [] }],
};

type TransformInput = Parameters<typeof jsonSchemaTransform>[0];

/** What a route's `config` may add to its operation (routes whose wire format zod cannot state). */
interface OpenapiConfig {
  /** The query as documented, for a route that reads its raw query. */
  openapiQuery?: ZodType;
  openapiBody?: ZodType;
  openapiResponses?: Record<number, ZodType>;
  /** The media type of `openapiResponses` when not JSON (`audio/wav`): documented as a binary string of that type. */
  openapiResponseMedia?: string;
}

/**
 * `jsonSchemaTransform` of fastify-type-provider-zod, after giving each operation its family's `security`
 * (unless the route names its own) and a hand-read query its documented parameters.
 */
export function openapiTransform(input: TransformInput): ReturnType<typeof jsonSchemaTransform> {
  const schema = { ...(input.schema ?? {}) } as FastifySchema & { tags?: string[]; security?: unknown; hide?: boolean };
  if (!schema.hide && schema.security === undefined) {
    const security = (schema.tags ?? []).map((tag) => SECURITY_BY_TAG[tag]).find(Boolean);
    if (security) schema.security = security;
  }
  const config = (input.route as { config?: OpenapiConfig } | undefined)?.config;
  if (config?.openapiQuery) schema.querystring = config.openapiQuery;
  if (config?.openapiBody) schema.body = config.openapiBody;
  if (config?.openapiResponses) schema.response = { ...(schema.response as object), ...config.openapiResponses };
  const out = jsonSchemaTransform({ ...input, schema });
  const media = config?.openapiResponseMedia;
  if (media && config.openapiResponses) {
    // @fastify/swagger takes a response's `content` as given: the body is bytes of that type, not JSON.
    const responses = (out.schema as { response?: Record<string, { description?: string }> }).response ?? {};
    for (const status of Object.keys(config.openapiResponses)) {
      const description = responses[status]?.description;
      responses[status] = { description, content: { [media]: { schema: { type: 'string', format: 'binary', description } } } } as { description?: string };
    }
  }
  return out;
}
