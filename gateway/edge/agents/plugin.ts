import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Services } from '../../../platform/services.js';
import { apiKeyAuth } from '../auth.js';
import { useErrorShape } from '../errors.js';
import { agentRoutes } from './agent-routes.js';
import { branchRoutes } from './branch-routes.js';
import { deploymentRoutes } from './deployment-routes.js';
import { functionRoutes } from './function-routes.js';
import { realtimeConfigRoutes } from './realtime-config-routes.js';
import { telephonyRoutes } from './telephony-routes.js';
import { variantRoutes } from './variant-routes.js';
import { voiceRoutes } from './voice-routes.js';

/** The Agents API (contract 4.1), mounted at `/v1`: every route needs an `x-api-key` of scope `agents`. */
export const agentsPlugin: FastifyPluginAsync<{ services: Services }> = async (root, { services }) => {
  const app = root.withTypeProvider<ZodTypeProvider>();
  useErrorShape(app, 'fields');
  app.addHook('onRequest', apiKeyAuth(services.keys, ['agents']));
  for (const group of [agentRoutes, branchRoutes, variantRoutes, functionRoutes, deploymentRoutes, realtimeConfigRoutes, telephonyRoutes, voiceRoutes]) group(app, services);
};
