import { z } from 'zod';
import { ENVIRONMENTS } from '../../../tenancy/connectors.js';
import { fieldErrorResponses, PathId } from '../schemas.js';
import { callerOf, type RouteGroup } from './context.js';
import { DeploymentResultView, DeploymentView, deploymentView } from './views.js';

const AgentParams = z.object({ agentId: PathId });
const DeploymentParams = AgentParams.extend({ deploymentId: PathId });
const Message = z.string({ error: 'deploymentMessage must be a string' }).max(2000, 'deploymentMessage must be at most 2000 characters').default('');
const Env = z.enum(ENVIRONMENTS, { error: 'environment must be one of sandbox, pre-release, live' });

/** Publish, promote, rollback, and reading what runs where. */
export const deploymentRoutes: RouteGroup = (app, { builder }) => {
  const { agents, deployments } = builder;
  const result = (r: { deployment: Parameters<typeof deploymentView>[0]; testRunIds: string[] }) => ({
    deployment: deploymentView(r.deployment),
    testRunIds: r.testRunIds,
  });

  app.post('/agents/:agentId/deployments/publish', {
    schema: {
      tags: ['agents'],
      summary: 'Freeze main into an artifact and deploy it to sandbox',
      params: AgentParams,
      body: z.object({ environment: Env.default('sandbox'), deploymentMessage: Message }).default({ environment: 'sandbox', deploymentMessage: '' }),
      response: { 200: DeploymentResultView, ...fieldErrorResponses },
    },
  }, async (req) => {
    const caller = callerOf(req);
    const agent = await agents.access(caller, req.params.agentId);
    return result(await deployments.publish(caller, agent, req.body));
  });

  app.post('/agents/:agentId/deployments/:deploymentId/promote', {
    schema: {
      tags: ['agents'],
      summary: 'Move a deployment on to the next environment after the furthest it has reached (sandbox → pre-release → live)',
      params: DeploymentParams,
      body: z.object({ targetEnvironment: Env.optional(), deploymentMessage: Message }).default({ deploymentMessage: '' }),
      response: { 200: DeploymentResultView, ...fieldErrorResponses },
    },
  }, async (req) => {
    const caller = callerOf(req);
    const agent = await agents.access(caller, req.params.agentId);
    return result(await deployments.promote(caller, agent, req.params.deploymentId, req.body));
  });

  app.post('/agents/:agentId/deployments/:deploymentId/rollback', {
    schema: {
      tags: ['agents'],
      summary: 'Revert the deployment\'s environment to it: it is active there again',
      params: DeploymentParams,
      body: z.object({ deploymentMessage: Message }).default({ deploymentMessage: '' }),
      response: { 200: DeploymentResultView, ...fieldErrorResponses },
    },
  }, async (req) => {
    const caller = callerOf(req);
    const agent = await agents.access(caller, req.params.agentId);
    return result(await deployments.rollback(caller, agent, req.params.deploymentId, req.body));
  });

  app.get('/agents/:agentId/deployments', {
    schema: {
      tags: ['agents'],
      summary: 'List deployments, the one activated last first',
      params: AgentParams,
      querystring: z.object({ environment: Env.optional(), limit: z.coerce.number().int().min(1).max(1000).default(100) }),
      response: { 200: z.object({ deployments: z.array(DeploymentView) }), ...fieldErrorResponses },
    },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return { deployments: (await deployments.list(agent, req.query.environment, req.query.limit)).map(deploymentView) };
  });

  app.get('/agents/:agentId/deployments/active', {
    schema: {
      tags: ['agents'],
      summary: 'What runs in each environment now',
      params: AgentParams,
      response: { 200: z.object({ activeDeployments: z.record(z.string(), DeploymentView.nullable()) }), ...fieldErrorResponses },
    },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const active: Record<string, ReturnType<typeof deploymentView> | null> = {};
    for (const env of ENVIRONMENTS) {
      const d = await deployments.active(agent.id, env);
      active[env] = d ? deploymentView(d) : null;
    }
    return { activeDeployments: active };
  });

  app.get('/agents/:agentId/deployments/:deploymentId', {
    schema: { tags: ['agents'], summary: 'Read a deployment', params: DeploymentParams, response: { 200: DeploymentView, ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return deploymentView(await deployments.get(agent, req.params.deploymentId));
  });
};
