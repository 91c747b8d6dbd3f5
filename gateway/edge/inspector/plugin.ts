import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Runtime } from '../../../actors/mod.js';
import { actorCounts, searchActors } from '../../../actors/inspector/mod.js';
import { ADMIN } from '../../../platform/errors.js';
import type { Services } from '../../../platform/services.js';
import { operatorAuth } from '../auth.js';
import { useErrorShape } from '../errors.js';
import { fieldErrorResponses, PathId } from '../schemas.js';
import { machineOf, summaries, svgOf } from './charts.js';
import { marksFor, MarksTracker } from './marks.js';
import { maybeMask, maybeMaskEvent } from './mask.js';
import { currentSnapshot, recentSteps, tailSteps, type Step } from './steps.js';

const Kind = z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'malformed kind');
const Flag = z.enum(['true', 'false']).optional();

/** A step as the inspector shows it: the state value after it and what it emitted (masked). */
export const showStep = (s: Step, unmasked: boolean, marked: readonly string[] = []) => ({
  seq: s.seq,
  version: s.version,
  at: new Date(s.at).toISOString(),
  value: s.value,
  events: s.events.map((e) => ({ type: e.type, data: maybeMaskEvent(e.type, e.data, unmasked, marked) })),
});

const StepSchema = z.object({ seq: z.number().int(), version: z.number().int(), at: z.string(), value: z.unknown(), events: z.array(z.object({ type: z.string(), data: z.unknown() })) });

export interface InspectorOptions {
  services: Services;
  runtime: Runtime;
  operatorTokenHash: string;
  /** How often a live stream reads the journal for new steps. */
  tailIntervalMs?: number;
}

/**
 * The inspector's admin API (`/admin/v1/inspector`, operator token): the statecharts of the catalog's
 * machines, the fleet (actor counts per kind and state, shards per worker), actor search, one actor live
 * (state, masked context, deadlines, placement, recent journal steps) and its steps as Server-Sent Events.
 */
export const inspectorPlugin: FastifyPluginAsync<InspectorOptions> = async (root, { services, runtime, operatorTokenHash, tailIntervalMs = 100 }) => {
  const app = root.withTypeProvider<ZodTypeProvider>();
  useErrorShape(app, 'fields');
  app.addHook('onRequest', operatorAuth(operatorTokenHash));
  const store = services.store;
  // Open streams end when the edge closes (SIGTERM drains; a stream never ends by itself).
  const streams = new Set<import('node:http').ServerResponse>();
  app.addHook('preClose', async () => {
    for (const res of streams) res.end();
  });

  app.get('/machines', {
    schema: {
      tags: ['admin'],
      summary: 'The drawable machines (machines/catalog.ts) with the address of each statechart',
      response: {
        200: z.object({
          data: z.array(z.object({ kind: z.string(), machine: z.string(), states: z.number().int(), transitions: z.number().int(), timers: z.number().int(), effects: z.number().int(), svg: z.string() })),
        }),
        ...fieldErrorResponses,
      },
    },
  }, async () => ({ data: summaries() }));

  app.get('/machines/:file', {
    schema: {
      tags: ['admin'],
      summary: "A machine's statechart as SVG (`{kind}.svg`): states, transitions with events and guards, effects and timers",
      params: z.object({ file: z.string().regex(/^[a-z][a-z0-9-]{0,31}\.svg$/, 'expected {kind}.svg') }),
      response: { 200: z.string(), ...fieldErrorResponses },
    },
  }, async (req, reply) => {
    const svg = svgOf(req.params.file.slice(0, -4));
    if (!svg) throw ADMIN.MACHINE_NOT_FOUND();
    return reply.type('image/svg+xml; charset=utf-8').header('cache-control', 'no-cache').serializer((x: unknown) => x as string).send(await svg);
  });

  app.get('/fleet', {
    schema: {
      tags: ['admin'],
      summary: 'Actors per kind and state across the fleet (the actor index), and the shards of each worker',
      response: {
        200: z.object({
          total: z.number().int(),
          kinds: z.record(z.string(), z.object({ total: z.number().int(), states: z.record(z.string(), z.number().int()) })),
          shardCount: z.number().int(),
          workers: z.array(z.object({ id: z.string(), shards: z.array(z.number().int()), liveActors: z.number().int() })),
          unownedShards: z.array(z.number().int()),
        }),
        ...fieldErrorResponses,
      },
    },
  }, async () => {
    const workers = (await runtime.directory.workers()).sort((a, b) => a.id.localeCompare(b.id));
    const owned = new Set(workers.flatMap((w) => w.shards));
    const counts = await actorCounts(store);
    return Object.assign(counts, {
      shardCount: runtime.shardCount,
      workers: workers.map((w) => ({ id: w.id, shards: w.shards, liveActors: w.liveActors })),
      unownedShards: Array.from({ length: runtime.shardCount }, (_, i) => i).filter((s) => !owned.has(s)),
    });
  });

  app.get('/actors', {
    schema: {
      tags: ['admin'],
      summary: 'Search actors (the actor index) by kind, state path, project and account, most recently moved first',
      querystring: z.object({
        kind: Kind.optional(),
        state: z.string().regex(/^[A-Za-z0-9_.-]{1,200}$/, 'a state path such as idle or agent.ready').optional(),
        project: PathId.optional(),
        account: PathId.optional(),
        limit: z.coerce.number().int().min(1).max(200).default(50),
        cursor: z.string().max(512).optional(),
      }),
      response: {
        200: z.object({
          data: z.array(z.object({ kind: z.string(), id: z.string(), account_id: z.string().nullable(), project_id: z.string().nullable(), state: z.string(), value: z.unknown(), version: z.number().int(), updated_at: z.string() })),
          next: z.string().nullable(),
        }),
        ...fieldErrorResponses,
      },
    },
  }, async (req) => {
    const page = await searchActors(store, req.query).catch((err) => {
      if ((err as Error).name === 'StoreCursorError') throw ADMIN.CURSOR_MALFORMED();
      throw err;
    });
    return {
      data: page.items.map((r) => ({ kind: r.kind, id: r.actor_id, account_id: r.account_id, project_id: r.project_id, state: r.state, value: r.value, version: r.version, updated_at: r.updated_at })),
      next: page.next,
    };
  });

  const ActorParams = z.object({ kind: Kind, id: PathId });

  app.get('/actors/:kind/:id', {
    schema: {
      tags: ['admin'],
      summary: "One actor: state value, context (personal data masked unless unmasked=true), pending deadlines, owner worker and fence, recent journal steps",
      params: ActorParams,
      querystring: z.object({ unmasked: Flag, journal: z.coerce.number().int().min(0).max(1000).default(100) }),
      response: {
        200: z.object({
          kind: z.string(),
          id: z.string(),
          machine: z.string().nullable(),
          status: z.string(),
          value: z.unknown(),
          context: z.unknown(),
          masked: z.boolean(),
          deadlines: z.array(z.object({ id: z.string(), until: z.string() })),
          placement: z.object({ shard: z.number().int(), fence: z.number().int(), version: z.number().int(), owner: z.string().nullable(), updatedAt: z.string() }),
          journal: z.array(StepSchema),
        }),
        ...fieldErrorResponses,
      },
    },
  }, async (req) => {
    const { kind, id } = req.params;
    const key = `${kind}/${id}`;
    const unmasked = req.query.unmasked === 'true';
    const d = await currentSnapshot(store, key);
    if (!d) throw ADMIN.ACTOR_NOT_FOUND();
    const owner = (await runtime.directory.workers()).find((w) => w.shards.includes(d.shard))?.id ?? null;
    const steps = req.query.journal > 0 ? await recentSteps(store, key, req.query.journal) : [];
    const marked = unmasked ? [] : await marksFor(store, kind, id, d.context);
    return {
      kind,
      id,
      machine: machineOf(kind)?.id ?? null,
      status: d.status,
      value: d.value,
      context: maybeMask(d.context, unmasked, marked),
      masked: !unmasked,
      deadlines: d.deadlines,
      placement: { shard: d.shard, fence: d.fence, version: d.version, owner, updatedAt: d.updatedAt },
      journal: steps.map((s) => showStep(s, unmasked, marked)),
    };
  });

  // The feed's path answers WebSocket upgrades only (`feed.ts`, on the server's `upgrade` event, which never reaches
  // a route): a plain request of it is told so, after the operator token, instead of a 404 that hides the path.
  app.get('/actors/:kind/:id/inspect', {
    schema: { tags: ['admin'], summary: "An actor's `@statelyai/inspect` feed: a WebSocket upgrade only (docs/inspector.md)", params: ActorParams, response: { ...fieldErrorResponses } },
  }, async () => {
    throw ADMIN.UPGRADE_REQUIRED();
  });

  app.get('/actors/:kind/:id/events', {
    schema: {
      tags: ['admin'],
      summary: "An actor's transitions as they are committed, as Server-Sent Events (`step`, then `snapshot`), from whichever worker hosts it",
      params: ActorParams,
      querystring: z.object({ unmasked: Flag, after: z.coerce.number().int().min(0).optional() }),
      response: { 200: z.string(), ...fieldErrorResponses },
    },
  }, async (req, reply) => {
    const { kind, id } = req.params;
    const key = `${kind}/${id}`;
    const unmasked = req.query.unmasked === 'true';
    const d = await currentSnapshot(store, key);
    if (!d) throw ADMIN.ACTOR_NOT_FOUND();
    const lastEventId = Number(req.headers['last-event-id']);
    const after = req.query.after ?? (Number.isInteger(lastEventId) && lastEventId >= 0 ? lastEventId : d.version);
    // Read before the stream opens (a failed read is an error answer, not a silent stream), then brought up to date
    // with every batch of steps: a step may mark a value, or deliver an answer its conversation marked.
    const marks = new MarksTracker(store, kind, id);
    let marked = unmasked ? [] : await marks.first(d.context);
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': req.id,
    });
    const send = (event: string, data: unknown, id?: number) => res.write(`${id !== undefined ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    const describe = (x: NonNullable<typeof d>) => ({ version: x.version, status: x.status, value: x.value, context: maybeMask(x.context, unmasked, marked), deadlines: x.deadlines, shard: x.shard, fence: x.fence, updatedAt: x.updatedAt });
    res.write('retry: 1000\n\n');
    send('snapshot', describe(d));
    const stop = tailSteps({
      store,
      key,
      afterVersion: after,
      intervalMs: tailIntervalMs,
      onSteps: async (steps, snapshot) => {
        if (!unmasked) marked = await marks.after((snapshot ?? d).context, steps);
        for (const s of steps) send('step', showStep(s, unmasked, marked), s.version);
        if (snapshot) send('snapshot', describe(snapshot));
      },
      onError: (err) => req.log.warn({ err, key }, 'inspector stream: reading the journal failed'),
    });
    // A comment line now and then keeps proxies from closing a quiet stream.
    const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), 15_000);
    const close = () => {
      stop();
      clearInterval(keepAlive);
    };
    res.on('close', () => {
      close();
      streams.delete(res);
    });
    streams.add(res);
  });
};
