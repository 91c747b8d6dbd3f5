import type { FastifyPluginAsync } from 'fastify';
import type { DegradedCause } from '../../actors/mod.js';

/**
 * `GET /healthz`: liveness. 200 `{"status":"ok"}` while serving (operator.md), with `degraded: [{reason,
 * since}]` added while something keeps this process from reaching actors (no live worker, a shard no worker
 * owns): the process still serves and must not be restarted for it, so the status stays 200. 503
 * `{"status":"draining"}` while starting or draining.
 */
export const healthPlugin: FastifyPluginAsync<{ isServing: () => boolean; degraded: () => DegradedCause[] }> = async (app, { isServing, degraded }) => {
  app.get('/healthz', { schema: { hide: true } }, async (_req, reply) => {
    if (!isServing()) return reply.code(503).send({ status: 'draining' });
    const causes = degraded();
    return causes.length ? { status: 'ok', degraded: causes } : { status: 'ok' };
  });
};
