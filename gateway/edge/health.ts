import type { FastifyPluginAsync } from 'fastify';

/** `GET /healthz`: 200 `{"status":"ok"}` while serving, 503 while starting or draining. */
export const healthPlugin: FastifyPluginAsync<{ isServing: () => boolean }> = async (app, { isServing }) => {
  app.get('/healthz', { schema: { hide: true } }, async (_req, reply) =>
    isServing() ? { status: 'ok' } : reply.code(503).send({ status: 'draining' }),
  );
};
