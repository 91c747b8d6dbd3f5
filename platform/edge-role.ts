import type { FastifyInstance } from 'fastify';
import type { Runtime } from '../actors/mod.js';
import type { SecretBox } from '../actors/delivery/mod.js';
import { buildEdge } from '../gateway/edge/server.js';
import type { Config } from './config.js';
import type { PlatformLogger } from './logger.js';
import type { Services } from './services.js';

/**
 * The edge role (the Fastify edge) built from the configuration and listening: the same in a process of its
 * own, beside the other roles, and in the embedded default's edge thread (`edge-thread.ts`).
 */
export async function serveEdge(o: {
  config: Config;
  services: Services;
  runtime: Runtime;
  operatorTokenHash: string;
  log: PlatformLogger;
  webhookSecrets: SecretBox;
  isServing: () => boolean;
}): Promise<FastifyInstance> {
  const { config } = o;
  const edge = await buildEdge({
    services: o.services,
    runtime: o.runtime,
    operatorTokenHash: o.operatorTokenHash,
    logger: o.log.logger,
    requestLevel: o.log.requestLevel,
    isServing: o.isServing,
    conversationIdleMs: config.conversationIdleMs,
    turnWaitMs: config.turnWaitMs,
    limits: config.edge,
    externalEvents: config.externalEvents,
    webhooks: { secrets: o.webhookSecrets, allowPrivateUrls: config.webhooks.allowPrivateUrls },
    apiErrorsFlushMs: config.alerts.apiErrorsFlushMs,
    region: config.region,
  });
  await edge.listen({ host: config.host, port: config.edgePort });
  return edge;
}
