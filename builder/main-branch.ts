import { StoreDuplicateError } from '../store/mod.js';
import { AGENTS } from '../platform/errors.js';
import { newId } from '../platform/secrets.js';
import { emptyContent } from './content.js';
import type { AgentRecord, BranchRecord, BuilderRecords } from './records.js';

/** The branch every agent has, made with it; merges go into it and publishes freeze it. */
export const MAIN = 'main';

/**
 * The agent's main branch, stored now when the agent has none. A create stores the agent, then its main branch
 * (the store has no transaction across records): a create a crash interrupts between the two leaves an agent
 * without one, which every read of main settles here, as the create would have made it (empty, created with
 * the agent), so no client ever meets an agent without its main branch. Two settling at once: the branches'
 * unique index on (agent, name) lets one in, and the other reads it.
 */
export async function mainBranch(r: BuilderRecords, agent: AgentRecord): Promise<BranchRecord> {
  const found = await r.branches.findOne({ agent_id: agent.id, name: MAIN });
  if (found) return found;
  try {
    return await r.branches.insert({
      id: newId('br'),
      agent_id: agent.id,
      account_id: agent.account_id,
      name: MAIN,
      status: 'open',
      base: null,
      content: emptyContent(),
      rev: 0,
      created_at: agent.created_at,
      updated_at: agent.created_at,
      merged_at: null,
    });
  } catch (err) {
    if (!(err instanceof StoreDuplicateError)) throw err;
  }
  const settled = await r.branches.findOne({ agent_id: agent.id, name: MAIN });
  if (!settled) throw AGENTS.BRANCH_NOT_FOUND();
  return settled;
}
