import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { describeSnapshot, type Runtime } from '../../actors/mod.js';
import { ADMIN } from '../../platform/errors.js';
import type { Services } from '../../platform/services.js';
import { operatorAuth } from './auth.js';
import { useErrorShape } from './errors.js';
import { fieldErrorResponses, PathId } from './schemas.js';

const Worker = z.object({
  id: z.string(),
  shards: z.array(z.number().int()),
  liveActors: z.number().int(),
  kinds: z.array(z.string()),
  startedAt: z.string(),
  seenAt: z.string(),
});

const Projection = z.object({
  name: z.string(),
  kinds: z.array(z.string()).nullable(),
  checkpoint: z.number().int(),
  partitions: z.array(z.number().int()),
  head: z.number().int(),
  behind: z.number().int(),
  epoch: z.number().int(),
  skipped: z.number().int(),
  lag: z.object({ p50: z.number(), p99: z.number(), samples: z.number().int() }).nullable(),
});

const Actor = z.object({
  key: z.string(),
  shard: z.number().int(),
  version: z.number().int(),
  fence: z.number().int(),
  updatedAt: z.string(),
  status: z.string(),
  value: z.unknown(),
  context: z.unknown(),
  deadlines: z.array(z.object({ id: z.string(), until: z.string() })),
  recentEventIds: z.array(z.string()),
});

/** What both admin plugins here are registered with. */
type AdminOptions = { services: Services; runtime: Runtime; operatorTokenHash: string };

/** An admin scope: zod-typed, field errors in the admin shape, the operator token required on every route. */
function adminScope(root: Parameters<FastifyPluginAsync<AdminOptions>>[0], operatorTokenHash: string) {
  const app = root.withTypeProvider<ZodTypeProvider>();
  useErrorShape(app, 'fields');
  app.addHook('onRequest', operatorAuth(operatorTokenHash));
  return app;
}

/**
 * Runtime introspection for operators and the state-machine inspector (admin token): the workers with
 * the shards each owns and its live actor count, and the stored snapshot of any actor by `kind/id`.
 */
export const runtimePlugin: FastifyPluginAsync<AdminOptions> = async (root, { services, runtime, operatorTokenHash }) => {
  const app = adminScope(root, operatorTokenHash);

  app.get('', {
    schema: {
      tags: ['admin'],
      summary: 'Workers, their shards and live actors',
      response: {
        200: z.object({
          transport: z.string(),
          shardCount: z.number().int(),
          kinds: z.array(z.string()),
          workers: z.array(Worker),
          unownedShards: z.array(z.number().int()),
          /** What keeps this process from reaching actors now (as `/healthz` shows it); empty when nothing. */
          degraded: z.array(z.object({ reason: z.string(), since: z.string() })),
        }),
        ...fieldErrorResponses,
      },
    },
  }, async () => {
    // Over NATS the directory is read from it: cut off, this is the one answer that cannot be given (an
    // unhandled error was a 500 for as long as NATS was away).
    const workers = (
      await runtime.directory.workers().catch((err: unknown) => {
        throw ADMIN.WORKER_DIRECTORY_UNAVAILABLE(err instanceof Error ? err.message : String(err));
      })
    ).sort((a, b) => a.id.localeCompare(b.id));
    const owned = new Set(workers.flatMap((w) => w.shards));
    return {
      transport: runtime.transport.kind,
      shardCount: runtime.shardCount,
      // The kinds this process knows and those its workers host (over NATS an edge knows only its own).
      kinds: [...new Set([...runtime.kinds.keys(), ...workers.flatMap((w) => w.kinds)])],
      workers,
      unownedShards: Array.from({ length: runtime.shardCount }, (_, i) => i).filter((s) => !owned.has(s)),
      degraded: runtime.health.degraded(),
    };
  });

  const Stats = z.object({ size: z.number().int(), hits: z.number().int(), misses: z.number().int(), invalidations: z.number().int() });
  /**
   * This edge process's tenancy cache (`tenancy/cache.ts`): per cache, entries held, hits, misses (the store
   * reads made through it) and invalidations applied. A debugging aid; the counters start at 0 with the process.
   */
  app.get('/tenancy-cache', {
    schema: {
      tags: ['admin'],
      summary: "This process's cache of keys, connectors, accounts, projects, settings and real-time config pages: sizes and counters",
      response: {
        200: z.object({
          ttlMs: z.number().int(),
          maxEntries: z.number().int(),
          caches: z.object({ keys: Stats, connectors: Stats, accounts: Stats, projects: Stats, settings: Stats, realtimeConfigs: Stats }),
        }),
        ...fieldErrorResponses,
      },
    },
  }, async () => ({ ttlMs: services.tenancy.options.ttlMs, maxEntries: services.tenancy.options.maxEntries, caches: services.tenancy.stats() }));

  app.get('/actors/:kind/:id', {
    schema: {
      tags: ['admin'],
      summary: "An actor's stored snapshot: state value, context, pending deadlines",
      params: z.object({ kind: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/), id: PathId }),
      response: { 200: Actor, ...fieldErrorResponses },
    },
  }, async (req) => {
    const record = await services.store.snapshots.get(`${req.params.kind}/${req.params.id}`);
    if (!record) throw ADMIN.ACTOR_NOT_FOUND();
    return describeSnapshot(record);
  });
};

/**
 * The projections (admin token): each projector's checkpoint, the journal's head and the commit-to-applied
 * lag; `?wait=1` first waits (up to `timeout_ms`, default 10 s) until every projector has applied everything
 * committed before the request (what tests call after a chat turn before reading a projection).
 * `POST /projections/{name}/rebuild` drops the projector's read model and replays the journal into it.
 */
export const projectionsPlugin: FastifyPluginAsync<AdminOptions> = async (root, { services, runtime, operatorTokenHash }) => {
  const app = adminScope(root, operatorTokenHash);
  const projections = runtime.projections;

  app.get('', {
    schema: {
      tags: ['admin'],
      summary: 'Projections: checkpoints, journal head, lag; ?wait=1 waits until they reach the head',
      querystring: z.object({
        wait: z.enum(['0', '1', 'true', 'false']).optional(),
        timeout_ms: z.coerce.number().int().min(0).max(120_000).optional(),
      }),
      response: {
        200: z.object({ head: z.number().int(), partitions: z.number().int(), caughtUp: z.boolean(), projections: z.array(Projection) }),
        ...fieldErrorResponses,
      },
    },
  }, async (req) => {
    if (!projections) return { head: await services.store.journal.head(), partitions: 0, caughtUp: true, projections: [] };
    const wait = req.query.wait === '1' || req.query.wait === 'true';
    const { caughtUp, projections: list } = await projections.status.waitForHead(wait ? req.query.timeout_ms ?? 10_000 : 0, () => projections.wake());
    return { head: list[0]?.head ?? (await services.store.journal.head()), partitions: projections.partitions, caughtUp, projections: list };
  });

  app.post('/:name/rebuild', {
    schema: {
      tags: ['admin'],
      summary: "Rebuilds a projection from the journal: drops its read model and replays every entry (live projection goes on)",
      params: z.object({ name: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,127}$/, 'name must be a projector name (lowercase letters, digits, dots, dashes)') }),
      response: { 202: Projection, ...fieldErrorResponses },
    },
  }, async (req, reply) => {
    const projector = projections?.status.find(req.params.name);
    if (!projections || !projector) throw ADMIN.PROJECTION_NOT_FOUND();
    const status = await projections.status.rebuild(projector);
    projections.wake();
    return reply.code(202).send(status);
  });
};
