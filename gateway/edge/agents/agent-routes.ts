import { z } from 'zod';
import { fieldErrorResponses, PathId } from '../schemas.js';
import { callerOf, type RouteGroup } from './context.js';
import { AgentView, BranchView, agentView, branchView } from './views.js';

const NAME = 'name must be between 1 and 128 characters';

/** `GET/POST /v1/agents`, `GET /v1/agents/{agentId}`. */
export const agentRoutes: RouteGroup = (app, { builder }) => {
  app.get('/agents', {
    schema: {
      tags: ['agents'],
      summary: "List the workspace's agents",
      response: { 200: z.object({ agents: z.array(AgentView) }), ...fieldErrorResponses },
    },
  }, async (req) => {
    const rows = await builder.agents.list(callerOf(req));
    return { agents: rows.map(({ agent, branchCount }) => agentView(agent, branchCount)) };
  });

  app.post('/agents', {
    schema: {
      tags: ['agents'],
      summary: 'Create an agent with its main branch',
      body: z.object({
        name: z.string({ error: NAME }).min(1, NAME).max(128, NAME),
        description: z.string({ error: 'description must be a string' }).max(4096, 'description must be at most 4096 characters').default(''),
        agentId: z.string().regex(/^[a-zA-Z0-9-]{1,64}$/, 'agentId must be 1 to 64 letters, digits or "-"').optional(),
      }),
      response: { 201: AgentView.extend({ defaultBranch: z.string(), branches: z.array(BranchView) }), ...fieldErrorResponses },
    },
  }, async (req, reply) => {
    const { agent, main } = await builder.agents.create(callerOf(req), req.body);
    return reply.code(201).send(Object.assign(agentView(agent, 1), { defaultBranch: main.name, branches: [branchView(main)] }));
  });

  app.get('/agents/:agentId', {
    schema: {
      tags: ['agents'],
      summary: 'Read an agent',
      params: z.object({ agentId: PathId }),
      response: { 200: AgentView, ...fieldErrorResponses },
    },
  }, async (req) => {
    const agent = await builder.agents.access(callerOf(req), req.params.agentId);
    return agentView(agent, await builder.agents.branchCount(agent));
  });
};
