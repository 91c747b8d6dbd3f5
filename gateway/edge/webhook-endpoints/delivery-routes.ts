import { hash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { DELIVERY_ID, DELIVERY_KIND, dispatchToEndpoint, webhookDeliveries, type DeliveryRecord } from '../../../actors/delivery/mod.js';
import { ActorAskError } from '../../../actors/mod.js';
import { RateLimitedError, WEBHOOKS } from '../../../platform/errors.js';
import { RateLimiter } from '../../../platform/rate-limit.js';
import { StoreCursorError } from '../../../store/mod.js';
import { alertsErrorResponses, FieldErrorBody } from '../schemas.js';
import type { RouteGroup, WebhooksContext } from './context.js';
import { EndpointParams, endpointOf } from './endpoint-routes.js';
import { DeliveryView, deliveryView } from './views.js';

const DeliveryParams = EndpointParams.extend({ delivery_id: z.string().regex(DELIVERY_ID, 'malformed delivery id') });
const LIMIT = 'limit must be an integer from 1 to 100';

/** Asks a delivery actor; 503 when it cannot be reached in time. */
async function ask(ctx: WebhooksContext, id: string, event: { type: string } & Record<string, unknown>): Promise<void> {
  try {
    await ctx.runtime.client.ask(DELIVERY_KIND, id, event);
  } catch (err) {
    if (err instanceof ActorAskError && err.code === 'DEADLINE') throw WEBHOOKS.DELIVERY_TIMEOUT();
    throw err;
  }
}

/**
 * The delivery log (`GET .../{id}/deliveries`, `GET .../{id}/deliveries/{delivery_id}`), redelivery
 * (`POST .../{id}/deliveries/{delivery_id}/redeliver`) and the test event (`POST .../{id}/test`).
 */
/**
 * Test events per endpoint: a burst of 5, then 1 a second. Each test event is a delivery retried for hours, so
 * a client looping on the route (the audit: 140 a second) piles up thousands of deliveries; the bucket cuts
 * that off while leaving a person's clicks alone. Per edge process, as every RateLimiter.
 */
const TEST_EVENTS_PER_SECOND = 1;
const TEST_EVENTS_BURST = 5;

export const deliveryRoutes: RouteGroup = (app, ctx) => {
  const log = webhookDeliveries(ctx.store);
  const testEvents = new RateLimiter(TEST_EVENTS_PER_SECOND, TEST_EVENTS_BURST);
  const tags = ['webhooks'];

  const deliveryOf = async (accountId: string, endpointId: string, id: string): Promise<DeliveryRecord> => {
    const d = await log.get(id);
    if (!d || d.account_id !== accountId || d.endpoint_id !== endpointId) throw WEBHOOKS.DELIVERY_NOT_FOUND();
    return d;
  };

  app.get('/:id/deliveries', {
    schema: {
      tags,
      summary: "The endpoint's deliveries, newest first, each with its attempts (status, timing, error)",
      params: EndpointParams,
      querystring: z
        .object({
          limit: z.coerce.number({ error: LIMIT }).int(LIMIT).min(1, LIMIT).max(100, LIMIT).default(20),
          cursor: z.string().max(512).optional(),
          event_id: z.string().max(128).optional(),
        }),
      response: { 200: z.object({ data: z.array(DeliveryView), next_cursor: z.string().nullable() }), ...alertsErrorResponses },
    },
  }, async (req) => {
    const accountId = req.apiKey!.account_id;
    await endpointOf(ctx, accountId, req.params.id);
    const filter: Record<string, unknown> = { endpoint_id: req.params.id, account_id: accountId };
    if (req.query.event_id !== undefined) filter.event_id = req.query.event_id;
    // A cursor names the log it walks (endpoint and event filter): one of another log is not one this issued.
    const tag = hash('sha256', `${req.params.id}\u0000${req.query.event_id ?? ''}`, 'base64url').slice(0, 11);
    let cursor: string | undefined;
    if (req.query.cursor !== undefined) {
      const dot = req.query.cursor.indexOf('.');
      if (dot < 0 || req.query.cursor.slice(0, dot) !== tag) throw WEBHOOKS.CURSOR_MALFORMED();
      cursor = req.query.cursor.slice(dot + 1);
    }
    try {
      const page = await log.page(filter, { sort: { created_at: -1 }, limit: req.query.limit, cursor });
      return { data: page.items.map(deliveryView), next_cursor: page.next === null ? null : `${tag}.${page.next}` };
    } catch (err) {
      if (err instanceof StoreCursorError) throw WEBHOOKS.CURSOR_MALFORMED();
      throw err;
    }
  });

  app.get('/:id/deliveries/:delivery_id', {
    schema: { tags, summary: 'One delivery with its attempts', params: DeliveryParams, response: { 200: DeliveryView, ...alertsErrorResponses } },
  }, async (req) => {
    const accountId = req.apiKey!.account_id;
    await endpointOf(ctx, accountId, req.params.id);
    return deliveryView(await deliveryOf(accountId, req.params.id, req.params.delivery_id));
  });

  app.post('/:id/deliveries/:delivery_id/redeliver', {
    schema: {
      tags,
      summary: 'Send the delivery again: a new series of attempts (on the retry schedule) with the same event id and body',
      params: DeliveryParams,
      response: { 202: DeliveryView, ...alertsErrorResponses, 503: FieldErrorBody },
    },
  }, async (req, reply) => {
    const accountId = req.apiKey!.account_id;
    const endpoint = await endpointOf(ctx, accountId, req.params.id);
    await deliveryOf(accountId, endpoint.id, req.params.delivery_id);
    if (!endpoint.enabled) throw WEBHOOKS.ENDPOINT_DISABLED();
    await ask(ctx, req.params.delivery_id, { type: 'REDELIVER', at: Date.now() });
    return reply.code(202).send(deliveryView(await deliveryOf(accountId, endpoint.id, req.params.delivery_id)));
  });

  app.post('/:id/test', {
    schema: {
      tags,
      summary: 'Send a `webhook.test` event to this endpoint (whatever it subscribes to)',
      params: EndpointParams,
      response: { 202: DeliveryView, ...alertsErrorResponses, 429: FieldErrorBody, 503: FieldErrorBody },
    },
  }, async (req, reply) => {
    const accountId = req.apiKey!.account_id;
    const endpoint = await endpointOf(ctx, accountId, req.params.id);
    if (!endpoint.enabled) throw WEBHOOKS.ENDPOINT_DISABLED();
    const wait = testEvents.take(endpoint.id);
    if (wait) throw new RateLimitedError(WEBHOOKS.TEST_RATE_LIMITED, wait);
    const eventId = `evt_test_${randomUUID().replace(/-/g, '')}`;
    const createdAt = new Date().toISOString();
    let started;
    try {
      started = await dispatchToEndpoint({ store: ctx.store, client: ctx.runtime.client }, endpoint, {
        id: eventId,
        type: 'webhook.test',
        account_id: accountId,
        project_id: null,
        body: { event_type: 'webhook.test', event_id: eventId, endpoint: { id: endpoint.id, name: endpoint.name }, created_at: createdAt },
      });
    } catch (err) {
      if (err instanceof ActorAskError && err.code === 'DEADLINE') throw WEBHOOKS.DELIVERY_TIMEOUT();
      throw err;
    }
    return reply.code(202).send(deliveryView(await deliveryOf(accountId, endpoint.id, started.delivery_id)));
  });
};
