import type { FastifyInstance } from 'fastify';
import { EdgeErrorCounter } from '../../../actors/metrics/mod.js';
import type { JournalStore } from '../../../store/mod.js';
import { httpResponses, turnLatency } from '../../../platform/metrics.js';

/** The interface family of a path, for the `api_errors` counts (no ids: a handful of values). */
export function familyOf(path: string): string {
  if (/^\/v1\/(alert-rules|alerts|webhook-endpoints)(\/|$)/.test(path)) return 'alerts';
  if (/^\/v1\/agents(\/|$)/.test(path)) return 'agents';
  if (/^\/admin\//.test(path)) return 'admin';
  if (/\/chat\/[a-z]+$/.test(path)) return 'chat';
  if (/external-events|agentic-dial/.test(path)) return 'external_events';
  if (/conversations|concurrency/.test(path)) return 'conversations';
  return 'other';
}

/**
 * Counts every answer by family and status for Prometheus (`platform/metrics.ts`), and every 5xx the edge answers for a request whose credentials name an account (and a project, for
 * project keys and connectors: `request.tenant`) into the `api_errors` metric: per minute, appended to the journal every few seconds off the request
 * path (`actors/metrics/edge-errors.ts`), flushed when the edge closes.
 */
export function countServerErrors(app: FastifyInstance, journal: Pick<JournalStore, 'append'>, flushMs?: number): EdgeErrorCounter {
  const counter = new EdgeErrorCounter(journal, { flushMs, onError: (err) => app.log.warn({ err }, 'api_errors counts not appended') });
  app.addHook('onResponse', async (request, reply) => {
    const path = request.url.split('?')[0];
    const family = familyOf(path);
    // Prometheus: every answer by family and status; chat turns' latency as the client saw it.
    httpResponses.inc({ family, status: String(reply.statusCode) });
    if (family === 'chat' && path.endsWith('/chat/respond') && reply.statusCode === 200) turnLatency.observe({ channel: 'chat' }, reply.elapsedTime / 1000);
    const tenant = request.tenant;
    if (reply.statusCode >= 500 && tenant) counter.record(tenant.account_id, tenant.project_id, family, reply.statusCode);
  });
  app.addHook('onClose', async () => counter.close());
  return counter;
}
