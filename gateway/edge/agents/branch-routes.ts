import { z } from 'zod';
import { own } from '../../../platform/own.js';
import { AGENTS } from '../../../platform/errors.js';
import { newId } from '../../../platform/secrets.js';
import type { Topic } from '../../../builder/mod.js';
import { BRANCH_NAME, BranchRef, fieldErrorResponses, PathId } from '../schemas.js';
import { callerOf, type RouteGroup } from './context.js';
import { BranchDetailView, BranchView, TopicView, branchDetailView, branchView, byName, topicView } from './views.js';

const BranchParams = z.object({ agentId: PathId, branch: BranchRef });
const TopicParams = BranchParams.extend({ topicId: PathId });
const TopicName = z.string().min(1, 'name must be between 1 and 256 characters').max(256, 'name must be between 1 and 256 characters');
const TopicContent = z.string().max(100_000, 'content must be at most 100000 characters');

/** Branches, merge, behavior and knowledge-base topics. `{branch}` is a branch id or name (`main`). */
export const branchRoutes: RouteGroup = (app, { builder }) => {
  const { agents, branches } = builder;

  app.post('/agents/:agentId/branches', {
    schema: {
      tags: ['agents'],
      summary: 'Cut a branch from main',
      params: z.object({ agentId: PathId }),
      // `branchName` is what the hosted service's own clients send; `name` is the contract's field.
      body: z
        .object({
          name: z.string({ error: 'name must be a string' }).regex(BRANCH_NAME, 'name must be 1 to 100 characters, not blank, without control characters').optional(),
          branchName: z.string({ error: 'branchName must be a string' }).regex(BRANCH_NAME, 'branchName must be 1 to 100 characters, not blank, without control characters').optional(),
        })
        .refine((b) => b.name !== undefined || b.branchName !== undefined, { message: 'name is required', path: ['name'] }),
      response: { 201: BranchView, ...fieldErrorResponses },
    },
  }, async (req, reply) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return reply.code(201).send(branchView(await branches.create(agent, (req.body.name ?? req.body.branchName)!)));
  });

  app.get('/agents/:agentId/branches', {
    schema: {
      tags: ['agents'],
      summary: 'List branches',
      params: z.object({ agentId: PathId }),
      response: { 200: z.object({ branches: z.array(BranchView) }), ...fieldErrorResponses },
    },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return { branches: (await branches.list(agent)).map(branchView) };
  });

  app.get('/agents/:agentId/branches/:branch', {
    schema: {
      tags: ['agents'],
      summary: 'Read a branch with its content (merged branches stay readable)',
      params: BranchParams,
      response: { 200: BranchDetailView, ...fieldErrorResponses },
    },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return branchDetailView(await branches.get(agent, req.params.branch));
  });

  app.post('/agents/:agentId/branches/:branchId/merge', {
    schema: {
      tags: ['agents'],
      summary: 'Merge a branch into main (three-way; 409 with the conflicting fields when both changed)',
      params: z.object({ agentId: PathId, branchId: PathId }),
      body: z.object({}).passthrough().optional(),
      response: {
        200: z.object({ merged: z.literal(true), branch: BranchView, main: BranchView, applied: z.array(z.string()) }),
        ...fieldErrorResponses,
      },
    },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const { branch, main, applied } = await branches.merge(agent, req.params.branchId);
    return { merged: true as const, branch: branchView(branch), main: branchView(main), applied };
  });

  app.get('/agents/:agentId/branches/:branch/behavior', {
    schema: { tags: ['agents'], summary: 'Read behavior', params: BranchParams, response: { 200: z.object({ behavior: z.string() }), ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return { behavior: (await branches.get(agent, req.params.branch)).content.behavior };
  });

  app.patch('/agents/:agentId/branches/:branch/behavior', {
    schema: {
      tags: ['agents'],
      summary: 'Replace behavior (system prompt and interaction rules)',
      params: BranchParams,
      body: z.object({ behavior: z.string({ error: 'behavior must be a string' }).max(100_000, 'behavior must be at most 100000 characters') }),
      response: { 200: z.object({ behavior: z.string() }), ...fieldErrorResponses },
    },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const { branch } = await branches.edit(agent, req.params.branch, (c) => {
      c.behavior = req.body.behavior;
    });
    return { behavior: branch.content.behavior };
  });

  app.post('/agents/:agentId/branches/:branch/knowledge-base/topics', {
    schema: {
      tags: ['agents'],
      summary: 'Add a knowledge-base topic (names are unique per branch)',
      params: BranchParams,
      body: z.object({ name: TopicName, content: TopicContent }),
      response: { 201: TopicView, ...fieldErrorResponses },
    },
  }, async (req, reply) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const { result } = await branches.edit(agent, req.params.branch, (c) => {
      assertFreeName(c.topics, req.body.name);
      const topic: Topic = { id: newId('topic'), name: req.body.name, content: req.body.content };
      c.topics[topic.id] = topic;
      return topic;
    });
    return reply.code(201).send(topicView(result));
  });

  app.get('/agents/:agentId/branches/:branch/knowledge-base/topics', {
    schema: { tags: ['agents'], summary: 'List topics', params: BranchParams, response: { 200: z.object({ topics: z.array(TopicView) }), ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return { topics: byName((await branches.get(agent, req.params.branch)).content.topics).map(topicView) };
  });

  app.get('/agents/:agentId/branches/:branch/knowledge-base/topics/:topicId', {
    schema: { tags: ['agents'], summary: 'Read a topic', params: TopicParams, response: { 200: TopicView, ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const topic = own((await branches.get(agent, req.params.branch)).content.topics, req.params.topicId);
    if (!topic) throw AGENTS.TOPIC_NOT_FOUND();
    return topicView(topic);
  });

  app.patch('/agents/:agentId/branches/:branch/knowledge-base/topics/:topicId', {
    schema: {
      tags: ['agents'],
      summary: 'Change a topic',
      params: TopicParams,
      body: z.object({ name: TopicName.optional(), content: TopicContent.optional() }),
      response: { 200: TopicView, ...fieldErrorResponses },
    },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const { result } = await branches.edit(agent, req.params.branch, (c) => {
      const topic = own(c.topics, req.params.topicId);
      if (!topic) throw AGENTS.TOPIC_NOT_FOUND();
      if (req.body.name !== undefined && req.body.name !== topic.name) assertFreeName(c.topics, req.body.name);
      Object.assign(topic, req.body.name === undefined ? {} : { name: req.body.name }, req.body.content === undefined ? {} : { content: req.body.content });
      return topic;
    });
    return topicView(result);
  });

  app.delete('/agents/:agentId/branches/:branch/knowledge-base/topics/:topicId', {
    schema: { tags: ['agents'], summary: 'Delete a topic', params: TopicParams, response: { 204: z.null(), ...fieldErrorResponses } },
  }, async (req, reply) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    await branches.edit(agent, req.params.branch, (c) => {
      if (!own(c.topics, req.params.topicId)) throw AGENTS.TOPIC_NOT_FOUND();
      delete c.topics[req.params.topicId];
    });
    return reply.code(204).send(null);
  });
};

/** Names are unique per branch within a kind of item. */
export function assertFreeName(items: Record<string, { name: string }>, name: string): void {
  if (Object.values(items).some((i) => i.name === name)) {
    throw AGENTS.NAME_EXISTS(name);
  }
}
