import { z } from 'zod';
import { BranchRef, fieldErrorResponses, PathId } from '../schemas.js';
import { callerOf, type RouteGroup } from './context.js';

// `{branch}` is a branch's id or its name, percent-encoded, as on every other branch route (docs/interfaces.md).
const BranchParams = z.object({ agentId: PathId, branch: BranchRef });
const Voice = z.object({
  voice: z.string({ error: 'voice must be a string' }).regex(/^[A-Za-z0-9_+.-]{0,64}$/, 'voice must be a voice name of at most 64 letters, digits, "_", "+", "." or "-" (empty: the default)'),
  rate: z.number({ error: 'rate must be a number' }).int('rate must be a whole number of words per minute').min(80, 'rate must be between 80 and 400').max(400, 'rate must be between 80 and 400'),
}).strict();

/**
 * How a branch sounds on a call (docs/voice.md): the speech engine's voice name and words per minute,
 * part of the branch content, so it is merged, published and deployed with the rest of it. A branch that
 * never set one reads the media gateway's defaults.
 */
export const voiceRoutes: RouteGroup = (app, { builder }) => {
  const { agents, branches } = builder;

  app.get('/agents/:agentId/branches/:branch/voice', {
    schema: { tags: ['agents'], summary: 'Read voice settings (calls)', params: BranchParams, response: { 200: Voice, ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return (await branches.get(agent, req.params.branch)).content.voice ?? { voice: '', rate: 150 };
  });

  app.put('/agents/:agentId/branches/:branch/voice', {
    schema: { tags: ['agents'], summary: 'Replace voice settings (calls): voice name and words per minute', params: BranchParams, body: Voice, response: { 200: Voice, ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const { branch } = await branches.edit(agent, req.params.branch, (c) => {
      c.voice = { voice: req.body.voice, rate: req.body.rate };
    });
    return branch.content.voice!;
  });
};
