import { z } from 'zod';
import { checkDestination, deleteEndpointLog, ENDPOINT_ID, MAX_URL_LENGTH, newSigningSecret, webhookEndpoints, type WebhookEndpointRecord } from '../../../actors/delivery/mod.js';
import { WEBHOOKS } from '../../../platform/errors.js';
import { newId } from '../../../platform/secrets.js';
import { StoreDuplicateError } from '../../../store/mod.js';
import { alertsErrorResponses } from '../schemas.js';
import type { RouteGroup, WebhooksContext } from './context.js';
import { CreateEndpointBody, UpdateEndpointBody } from './body.js';
import { EndpointView, EndpointWithSecret, endpointView } from './views.js';

/** The endpoint id in a path: anything else is a malformed id (422). */
export const EndpointParams = z.object({ id: z.string().regex(ENDPOINT_ID, 'malformed webhook endpoint id') });

/** 400 unless `url` is an http(s) URL whose host resolves to public addresses only (or private ones are allowed). */
async function checkUrl(ctx: WebhooksContext, url: string): Promise<void> {
  const problem = await checkDestination(url, ctx.allowPrivateUrls);
  if (problem === 'invalid' || problem === 'scheme') throw WEBHOOKS.URL_INVALID(MAX_URL_LENGTH);
  if (problem === 'credentials') throw WEBHOOKS.URL_CREDENTIALS();
  if (problem === 'unresolvable') throw WEBHOOKS.URL_UNRESOLVABLE();
  if (problem === 'private') throw WEBHOOKS.URL_PRIVATE();
}

/** The key's account's endpoint with this id; 404 for another account's or none. */
export async function endpointOf(ctx: WebhooksContext, accountId: string, id: string): Promise<WebhookEndpointRecord> {
  const endpoint = await webhookEndpoints(ctx.store).get(id);
  if (!endpoint || endpoint.account_id !== accountId) throw WEBHOOKS.ENDPOINT_NOT_FOUND();
  return endpoint;
}

/** Create, list, read, update, delete and rotate-secret of `/v1/webhook-endpoints`. */
export const endpointRoutes: RouteGroup = (app, ctx) => {
  const endpoints = webhookEndpoints(ctx.store);
  const tags = ['webhooks'];

  app.post('', {
    schema: {
      tags,
      summary: 'Create a webhook endpoint; the answer shows its signing secret, once',
      body: CreateEndpointBody,
      response: { 201: EndpointWithSecret, ...alertsErrorResponses },
    },
  }, async (req, reply) => {
    const accountId = req.apiKey!.account_id;
    await checkUrl(ctx, req.body.url);
    const secret = newSigningSecret();
    const now = new Date().toISOString();
    // The limit holds across edges: each endpoint takes a free slot, and a slot another create took meanwhile
    // is refused by the unique (account, slot) index, so the loser tries the next one.
    for (;;) {
      const taken = new Set((await endpoints.find({ account_id: accountId })).map((e) => e.slot));
      const slot = [...Array(ctx.maxEndpoints).keys()].find((s) => !taken.has(s));
      if (slot === undefined) throw WEBHOOKS.ENDPOINT_LIMIT(ctx.maxEndpoints);
      const record: WebhookEndpointRecord = {
        id: newId('whe'),
        account_id: accountId,
        slot,
        ...req.body,
        secret: ctx.secrets.seal(secret),
        created_at: now,
        updated_at: now,
      };
      try {
        await endpoints.insert(record);
        return reply.code(201).send(Object.assign(endpointView(record), { signing_secret: secret }));
      } catch (err) {
        if (!(err instanceof StoreDuplicateError)) throw err;
      }
    }
  });

  app.get('', {
    schema: {
      tags,
      summary: "List the account's webhook endpoints (no pagination)",
      querystring: z.object({ enabled: z.enum(['true', 'false'], { error: 'enabled must be true or false' }).optional() }),
      response: { 200: z.object({ data: z.array(EndpointView) }), ...alertsErrorResponses },
    },
  }, async (req) => {
    const filter: Record<string, unknown> = { account_id: req.apiKey!.account_id };
    if (req.query.enabled !== undefined) filter.enabled = req.query.enabled === 'true';
    const rows = await endpoints.find(filter, { sort: { created_at: 1 } });
    return { data: rows.map(endpointView) };
  });

  app.get('/:id', {
    schema: { tags, summary: 'Read a webhook endpoint', params: EndpointParams, response: { 200: EndpointView, ...alertsErrorResponses } },
  }, async (req) => endpointView(await endpointOf(ctx, req.apiKey!.account_id, req.params.id)));

  app.patch('/:id', {
    schema: {
      tags,
      summary: 'Change any of name, url, event_types, headers, timeout_ms, enabled',
      params: EndpointParams,
      body: UpdateEndpointBody,
      response: { 200: EndpointView, ...alertsErrorResponses },
    },
  }, async (req) => {
    const accountId = req.apiKey!.account_id;
    await endpointOf(ctx, accountId, req.params.id);
    if (req.body.url !== undefined) await checkUrl(ctx, req.body.url);
    const updated = await endpoints.update({ id: req.params.id, account_id: accountId }, { $set: { updated_at: new Date().toISOString(), ...req.body } });
    if (!updated) throw WEBHOOKS.ENDPOINT_NOT_FOUND();
    return endpointView(updated);
  });

  app.delete('/:id', {
    schema: { tags, summary: 'Delete a webhook endpoint (its pending deliveries stop at their next attempt)', params: EndpointParams, response: { 204: z.null(), ...alertsErrorResponses } },
  }, async (req, reply) => {
    const removed = await endpoints.delete({ id: req.params.id, account_id: req.apiKey!.account_id });
    if (removed === 0) throw WEBHOOKS.ENDPOINT_NOT_FOUND();
    // Its delivery log goes with it (a delivery in flight writes its record once more as it fails: the sweep's).
    await deleteEndpointLog(ctx.store, req.apiKey!.account_id, req.params.id);
    return reply.code(204).send(null);
  });

  app.post('/:id/rotate-secret', {
    schema: {
      tags,
      summary: 'Replace the signing secret; the answer shows the new one, once. The next attempt of every delivery is signed with it',
      params: EndpointParams,
      response: { 200: EndpointWithSecret, ...alertsErrorResponses },
    },
  }, async (req) => {
    const accountId = req.apiKey!.account_id;
    const secret = newSigningSecret();
    const updated = await endpoints.update({ id: req.params.id, account_id: accountId }, { $set: { secret: ctx.secrets.seal(secret), updated_at: new Date().toISOString() } });
    if (!updated) throw WEBHOOKS.ENDPOINT_NOT_FOUND();
    return Object.assign(endpointView(updated), { signing_secret: secret });
  });
};
