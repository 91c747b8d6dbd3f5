import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { WEBHOOKS } from '../../../platform/errors.js';
import type { ApiKeys } from '../../../tenancy/keys.js';
import { apiKeyAuth } from '../auth.js';
import { refuseRepeatedQuery, useErrorShape } from '../errors.js';
import type { WebhooksContext } from './context.js';
import { deliveryRoutes } from './delivery-routes.js';
import { endpointRoutes } from './endpoint-routes.js';

/** Webhook endpoints per account (addendum: at most 10; the 11th is 409). */
export const MAX_ENDPOINTS_PER_ACCOUNT = 10;

/**
 * Webhook endpoints and their deliveries (contract 2.4, 4.2; addendum "Alert webhooks"), mounted at
 * `/v1/webhook-endpoints`: every route needs an `x-api-key` of scope `alerts` and sees only its account.
 * Errors in the Alerts shape `{message, errors}`. An endpoint receives the notices of every project of the
 * account, so a key issued with a `project_id` is refused on every route (401 as the Alerts API answers a key
 * it does not take: contract 7.2 has no 403), before its body is read.
 */
export const webhookEndpointsPlugin: FastifyPluginAsync<Omit<WebhooksContext, 'maxEndpoints'> & { keys: ApiKeys; maxEndpoints?: number }> = async (root, opts) => {
  const app = root.withTypeProvider<ZodTypeProvider>();
  useErrorShape(app, 'fields');
  app.addHook('onRequest', apiKeyAuth(opts.keys, ['alerts'], { otherScope: 401 }));
  app.addHook('onRequest', async (request) => {
    const bound = request.apiKey!.project_id;
    if (bound !== null) throw WEBHOOKS.KEY_PROJECT_BOUND(bound);
  });
  app.addHook('preValidation', refuseRepeatedQuery);
  const ctx: WebhooksContext = { ...opts, maxEndpoints: opts.maxEndpoints ?? MAX_ENDPOINTS_PER_ACCOUNT };
  for (const group of [endpointRoutes, deliveryRoutes]) group(app, ctx);
};
