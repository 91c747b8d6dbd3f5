import { z } from 'zod';
import { AGENTS } from '../../../platform/errors.js';
import { fieldErrorResponses, JsonObject, PathId } from '../schemas.js';
import { configPageChars, MAX_CONFIG_PAGE_CHARS } from '../../../builder/mod.js';
import { callerOf, type RouteGroup } from './context.js';
import { RealtimeConfigView, realtimeConfigView } from './views.js';

const ConfigParams = z.object({ agentId: PathId, config: PathId });

/** Real-time config pages: runtime values effective at once, without a publish. */
export const realtimeConfigRoutes: RouteGroup = (app, { builder }) => {
  const { agents, realtimeConfigs } = builder;

  app.patch('/agents/:agentId/real-time-configs/:config/variables', {
    schema: {
      tags: ['agents'],
      summary: 'Merge variables into a config page (JSON merge patch: null removes a key; the page, merged, at most 256 KiB)',
      params: ConfigParams,
      body: z.object({ variables: JsonObject.refine((v) => configPageChars(v) <= MAX_CONFIG_PAGE_CHARS, 'variables must be at most 256 KiB') }),
      response: { 200: RealtimeConfigView, ...fieldErrorResponses },
    },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return realtimeConfigView(await realtimeConfigs.patch(agent, req.params.config, req.body.variables));
  });

  app.get('/agents/:agentId/real-time-configs/:config', {
    schema: { tags: ['agents'], summary: 'Read a config page', params: ConfigParams, response: { 200: RealtimeConfigView, ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const page = await realtimeConfigs.get(agent, req.params.config);
    if (!page) throw AGENTS.CONFIG_NOT_FOUND();
    return realtimeConfigView(page);
  });

  app.get('/agents/:agentId/real-time-configs', {
    schema: {
      tags: ['agents'],
      summary: 'List config pages',
      params: z.object({ agentId: PathId }),
      response: { 200: z.object({ configPages: z.array(RealtimeConfigView) }), ...fieldErrorResponses },
    },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return { configPages: (await realtimeConfigs.list(agent)).map(realtimeConfigView) };
  });
};
