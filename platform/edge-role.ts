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
    conversationMaxAttributesBytes: config.conversationMaxAttributesBytes,
    turnWaitMs: config.turnWaitMs,
    limits: config.edge,
    externalEvents: config.externalEvents,
    webhooks: { secrets: o.webhookSecrets, allowPrivateUrls: config.webhooks.allowPrivateUrls },
    apiErrorsFlushMs: config.alerts.apiErrorsFlushMs,
    region: config.region,
  });
  try {
    await edge.listen({ host: config.host, port: config.edgePort });
  } catch (err) {
    throw edgeListenError(err, config.host, config.edgePort);
  }
  return edge;
}

/**
 * The start failure of an edge whose port could not be listened on, naming the setting to change (as the socket
 * and media gateways name theirs): Node's own (`listen EADDRINUSE: address already in use 127.0.0.1:8080`) names
 * none. Other errors (a plugin's, say) are left as they are.
 */
function edgeListenError(err: unknown, host: string, port: number): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return new Error(`EDGE_PORT ${port} is in use on ${host}; set EDGE_PORT to a free port, or 0 for any`);
  if (code === 'EACCES') return new Error(`EDGE_PORT ${port} may not be listened on by this user (EACCES); set EDGE_PORT to 1024 or above, or 0 for any`);
  return err;
}
