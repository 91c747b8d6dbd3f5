import { Script } from 'node:vm';
import { z } from 'zod';
import { own } from '../../../platform/own.js';
import { AGENTS } from '../../../platform/errors.js';
import { BranchRef, fieldErrorResponses, PathId } from '../schemas.js';
import { callerOf, type RouteGroup } from './context.js';
import { byName } from './views.js';

/**
 * A function's name: an identifier. `__proto__` is not one a map of functions can hold (assigning it replaces the
 * map's prototype); names of other `Object.prototype` members are ordinary names, looked up as own properties.
 */
const FunctionName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'malformed function name').refine((n) => n !== '__proto__', 'malformed function name');
const FunctionParams = z.object({ agentId: PathId, branch: BranchRef, name: FunctionName });
const FunctionView = z.object({ name: z.string(), code: z.string() });

/**
 * Only parses the source (a `Script` is compiled, never run here): a syntax error is a 400 at save time
 * instead of a function error in every conversation. Tenant code runs only in the sandbox.
 */
function assertParses(code: string): void {
  try {
    new Script(`(${code}\n)`, { filename: 'function.js' });
  } catch (err) {
    throw AGENTS.FUNCTION_UNPARSABLE((err as Error).message);
  }
}

/** Project functions on a branch: `start`, `turn` and `end` hooks, and tools. Frozen into artifacts on publish. */
export const functionRoutes: RouteGroup = (app, { builder }) => {
  const { agents, branches } = builder;

  app.put('/agents/:agentId/branches/:branch/functions/:name', {
    schema: {
      tags: ['agents'],
      summary: 'Create or replace a project function',
      params: FunctionParams,
      body: z.object({ code: z.string({ error: 'code must be a string' }).min(1, 'code must not be empty').max(65_536, 'code must be at most 64 KiB') }),
      response: { 200: FunctionView, ...fieldErrorResponses },
    },
  }, async (req) => {
    assertParses(req.body.code);
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const { result } = await branches.edit(agent, req.params.branch, (c) => {
      c.functions[req.params.name] = { name: req.params.name, code: req.body.code };
      return c.functions[req.params.name];
    });
    return result;
  });

  app.get('/agents/:agentId/branches/:branch/functions', {
    schema: {
      tags: ['agents'],
      summary: 'List project functions',
      params: z.object({ agentId: PathId, branch: BranchRef }),
      response: { 200: z.object({ functions: z.array(FunctionView) }), ...fieldErrorResponses },
    },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const branch = await branches.get(agent, req.params.branch);
    return { functions: byName(branch.content.functions ?? {}) };
  });

  app.get('/agents/:agentId/branches/:branch/functions/:name', {
    schema: { tags: ['agents'], summary: 'Read a project function', params: FunctionParams, response: { 200: FunctionView, ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const fn = own((await branches.get(agent, req.params.branch)).content.functions, req.params.name);
    if (!fn) throw AGENTS.FUNCTION_NOT_FOUND();
    return fn;
  });

  app.delete('/agents/:agentId/branches/:branch/functions/:name', {
    schema: { tags: ['agents'], summary: 'Delete a project function', params: FunctionParams, response: { 204: z.null(), ...fieldErrorResponses } },
  }, async (req, reply) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    await branches.edit(agent, req.params.branch, (c) => {
      if (!own(c.functions, req.params.name)) throw AGENTS.FUNCTION_NOT_FOUND();
      delete c.functions[req.params.name];
    });
    return reply.code(204).send(null);
  });
};
