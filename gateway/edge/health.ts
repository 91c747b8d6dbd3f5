import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { DegradedCause } from '../../actors/mod.js';

/**
 * `GET /healthz`: liveness. 200 `{"status":"ok"}` while serving (operator.md), with `degraded: [{reason,
 * since}]` added while something keeps this process from reaching actors (no live worker, a shard no worker
 * owns): the process still serves and must not be restarted for it, so the status stays 200. 503
 * `{"status":"draining"}` while starting or draining.
 */
export const healthPlugin: FastifyPluginAsync<{ isServing: () => boolean; degraded: () => DegradedCause[] }> = async (app, { isServing, degraded }) => {
  app.get('/healthz', {
    // Documented, not validated: the answer is built here and needs no serializer's pass.
    schema: { tags: ['operations'], summary: 'Liveness: 200 while serving (with the causes of any degradation), 503 while starting or draining', security: [] },
    config: {
      openapiResponses: {
        200: z.object({ status: z.literal('ok'), degraded: z.array(z.object({ reason: z.string(), since: z.string() })).optional() }),
        503: z.object({ status: z.literal('draining') }),
      },
    },
  }, async (_req, reply) => {
    if (!isServing()) return reply.code(503).send({ status: 'draining' });
    const causes = degraded();
    return causes.length ? { status: 'ok', degraded: causes } : { status: 'ok' };
  });
};
