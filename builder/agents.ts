import { StoreDuplicateError } from '../store/mod.js';
import { nowIso } from '../platform/clock.js';
import { AGENTS } from '../platform/errors.js';
import { newId } from '../platform/secrets.js';
import { slugify } from '../platform/slug.js';
import { mainBranch } from './main-branch.js';
import type { AgentRecord, BranchRecord, BuilderRecords } from './records.js';

/** Who is calling the Agents API: the account (workspace) of their key, and the agent it is bound to, if any. */
export interface Caller {
  accountId: string;
  /** A key bound to one project may only touch that agent. */
  projectId: string | null;
  keyId: string;
}

export { MAIN } from './main-branch.js';

/** Agents of an account, and the access rule every agent-scoped operation starts with. */
export class Agents {
  constructor(private readonly r: BuilderRecords) {}

  /** Creates an agent with its `main` branch; `agentId` picks the id (409 when taken), else one is made. */
  async create(caller: Caller, input: { name: string; description: string; agentId?: string }): Promise<{ agent: AgentRecord; main: BranchRecord }> {
    if (caller.projectId) throw AGENTS.AGENT_CREATE_BOUND();
    const id = input.agentId ?? newId('agent').replace('_', '-');
    // An agent is addressed by its id or its slug (`access`), its own account's first: within an account no
    // name may be both one agent's id and another's slug, or addressing by it would reach the wrong project.
    if (input.agentId) {
      if (await this.r.agents.get(id)) throw AGENTS.AGENT_EXISTS();
      if (await this.r.agents.findOne({ account_id: caller.accountId, slug: id })) throw AGENTS.AGENT_ID_IS_SLUG();
    }
    const now = nowIso();
    const base = slugify(input.name, id.toLowerCase());
    let agent: AgentRecord | undefined;
    for (let n = 1; !agent; n++) {
      const slug = n === 1 ? base : `${base.slice(0, 56)}-${n}`;
      if (slug !== id && (await this.r.agents.get(slug))?.account_id === caller.accountId) continue;
      let made: AgentRecord;
      try {
        made = await this.r.agents.insert({
          id,
          account_id: caller.accountId,
          name: input.name,
          slug,
          description: input.description,
          created_at: now,
          updated_at: now,
          deployment_seq: 0,
        });
      } catch (err) {
        if (!(err instanceof StoreDuplicateError)) throw err;
        // A taken id (a concurrent create with the same agentId) is a conflict; a taken slug gets a suffix.
        if (err.fields.includes('id')) throw AGENTS.AGENT_EXISTS();
        continue;
      }
      const clash = await this.yieldsTo(made);
      if (clash === 'id') throw AGENTS.AGENT_ID_IS_SLUG();
      if (clash === null) agent = made;
    }
    // A crash before this leaves an agent without its main branch, which the next read stores (`mainBranch`).
    const main = await mainBranch(this.r, agent);
    return { agent, main };
  }

  /**
   * Settles a race the checks before the insert cannot see: a create running at the same moment whose id is
   * this agent's slug, or whose slug is this agent's id (each checked before the other was stored). Of two such
   * agents the later one (by `created_at`, then id: both sides read the same order) gives way: it is removed
   * again, and says which of its names clashed, its id (a 409 for a chosen `agentId`) or its slug (the next
   * suffix is tried). Both are checked after both inserts, or the earlier one before the later was stored and
   * the later one after; either way exactly one gives way. Nothing refers to the agent yet (its main branch
   * comes after).
   */
  private async yieldsTo(agent: AgentRecord): Promise<'id' | 'slug' | null> {
    const earlier = (other: AgentRecord | null): other is AgentRecord =>
      other !== null && other.id !== agent.id && other.account_id === agent.account_id &&
      (other.created_at < agent.created_at || (other.created_at === agent.created_at && other.id < agent.id));
    const clash = earlier(await this.r.agents.findOne({ account_id: agent.account_id, slug: agent.id }))
      ? 'id'
      : agent.slug !== agent.id && earlier(await this.r.agents.get(agent.slug))
        ? 'slug'
        : null;
    if (clash) await this.r.agents.delete({ id: agent.id });
    return clash;
  }

  /** The caller's agents, oldest first. Another account's agents never appear. */
  async list(caller: Caller): Promise<Array<{ agent: AgentRecord; branchCount: number }>> {
    const filter: Record<string, unknown> = { account_id: caller.accountId };
    if (caller.projectId) filter.id = caller.projectId;
    const agents = await this.r.agents.find(filter, { sort: { created_at: 1 } });
    return Promise.all(agents.map(async (agent) => ({ agent, branchCount: await this.branchCount(agent) })));
  }

  /** Whether an agent (project) with this id exists, in any account: for the operator. */
  async exists(agentId: string): Promise<boolean> {
    return (await this.r.agents.get(agentId)) !== null;
  }

  /** How many branches the agent has: main at least (a main a crash left unmade is stored now, `mainBranch`). */
  async branchCount(agent: AgentRecord): Promise<number> {
    const count = await this.r.branches.count({ agent_id: agent.id });
    if (count > 0) return count;
    await mainBranch(this.r, agent);
    return 1;
  }

  /**
   * The agent the caller addresses, by id or by slug within the caller's account: its own agents first, so
   * that another account's agent created with a chosen `agentId` equal to one of its slugs cannot take that
   * slug over. Another account's agent is 403, as is another agent than the one a project-bound key names;
   * an unknown one is 404.
   */
  async access(caller: Caller, agentId: string): Promise<AgentRecord> {
    const byId = await this.r.agents.get(agentId);
    const agent =
      byId?.account_id === caller.accountId
        ? byId
        : ((await this.r.agents.findOne({ account_id: caller.accountId, slug: agentId })) ?? byId);
    if (!agent) throw AGENTS.AGENT_NOT_FOUND();
    if (agent.account_id !== caller.accountId) throw AGENTS.AGENT_OTHER_ACCOUNT();
    if (caller.projectId && caller.projectId !== agent.id) throw AGENTS.AGENT_OTHER_PROJECT();
    return agent;
  }
}
