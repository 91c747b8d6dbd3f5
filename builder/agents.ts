import { StoreDuplicateError } from '../store/mod.js';
import { nowIso } from '../platform/clock.js';
import { AGENTS } from '../platform/errors.js';
import { newId } from '../platform/secrets.js';
import { slugify } from '../platform/slug.js';
import { mainBranch } from './main-branch.js';
import { NameClaims } from './names.js';
import type { AgentRecord, BranchRecord, BuilderRecords } from './records.js';

/** Who is calling the Agents API: the account (workspace) of their key, and the agent it is bound to, if any. */
export interface Caller {
  accountId: string;
  /** A key bound to one project may only touch that agent. */
  projectId: string | null;
  keyId: string;
}

export { MAIN } from './main-branch.js';

const newAgentId = (): string => newId('agent').replace('_', '-');

/**
 * The most agents an account holds by default (`AGENTS_MAX_PER_ACCOUNT`). The contract's agent list has no
 * pagination, so every list answers them all, each with its branch count: unbounded, 6,427 agents made in 90 s
 * made a list of 1.5 MB and 0.8 s on the edge thread other accounts share. A thousand is far more than one
 * workspace's projects, and keeps a list a tenth of that.
 */
export const MAX_AGENTS_PER_ACCOUNT = 1000;

/** Agents of an account, and the access rule every agent-scoped operation starts with. */
export class Agents {
  private readonly names: NameClaims;
  /** Each account's creates in this process, one after another (`create`): the tail of its chain. */
  private readonly creating = new Map<string, Promise<unknown>>();

  constructor(
    private readonly r: BuilderRecords,
    private readonly maxPerAccount = MAX_AGENTS_PER_ACCOUNT,
  ) {
    this.names = new NameClaims(r);
  }

  /**
   * Creates an agent with its `main` branch; `agentId` picks the id (409 when taken), else one is made.
   *
   * An agent is addressed by its id or its slug (`access`), its own account's first: within an account no name
   * may be both one agent's id and another's slug, or addressing by it would reach the wrong project. The lookups
   * before the insert see the agents already stored; a create running at the same moment is seen by the claims
   * (`names.ts`): the id and then the slug are claimed before the agent is stored, and the store lets one create
   * have each name, so of an `agentId: N` and a `name: N` created together exactly one holds N (the other is a
   * 409, or takes a suffix). The agent is stored after its claims and before its main branch: a crash before the
   * agent leaves claims that go stale, one after it an agent whose main branch the next read stores
   * (`mainBranch`). No agent is ever stored and removed again, save after a create that stalled a minute
   * between its claims and its insert (`NameClaims.lost`). A create that ends without its agent stored (an
   * error, a 409) releases the claims it wrote, as does one for a slug it gave up (`NameClaims.release`).
   *
   * An account holding `maxPerAccount` agents creates no more (AGENT_LIMIT). An account's creates run one after
   * another in this process, so the count each reads includes the ones before it: a burst of creates stops at
   * the bound. Creates of one account on several edge processes at the same moment may each pass it, exceeding
   * the bound by at most one per other process.
   */
  async create(caller: Caller, input: { name: string; description: string; agentId?: string }): Promise<{ agent: AgentRecord; main: BranchRecord }> {
    if (caller.projectId) throw AGENTS.AGENT_CREATE_BOUND();
    const account = caller.accountId;
    const before = this.creating.get(account);
    const run = (before ?? Promise.resolve()).then(() => this.createNow(account, input));
    // The chain's tail never rejects, so a failed create does not fail the ones queued behind it.
    const tail = run.catch(() => undefined);
    this.creating.set(account, tail);
    void tail.then(() => {
      if (this.creating.get(account) === tail) this.creating.delete(account);
    });
    return run;
  }

  private async createNow(account: string, input: { name: string; description: string; agentId?: string }): Promise<{ agent: AgentRecord; main: BranchRecord }> {
    if ((await this.r.agents.count({ account_id: account })) >= this.maxPerAccount) throw AGENTS.AGENT_LIMIT(this.maxPerAccount);
    const chosen = input.agentId;
    let id = chosen ?? newAgentId();
    if (chosen) {
      if (await this.r.agents.get(id)) throw AGENTS.AGENT_EXISTS();
      if (await this.r.agents.findOne({ account_id: account, slug: id })) throw AGENTS.AGENT_ID_IS_SLUG();
    }
    // What this create claimed, released at the end unless its agent answers to it (`NameClaims.release`).
    const by = this.names.newCreate();
    const claimed: string[] = [];
    let stored: AgentRecord | null = null;
    try {
      // Claimed by another create's slug (a made id only by the wildest chance: make another).
      while ((await this.names.claim(account, id, id, by)) === 'taken') {
        if (chosen) throw AGENTS.AGENT_ID_IS_SLUG();
        id = newAgentId();
      }
      claimed.push(id);
      const now = nowIso();
      const base = slugify(input.name, id.toLowerCase());
      for (let n = 1; ; n++) {
        const slug = n === 1 ? base : `${base.slice(0, 56)}-${n}`;
        if (slug !== id) {
          // Another agent's id, of those stored (the lookup) or being created (the claim): the next suffix.
          if ((await this.r.agents.get(slug))?.account_id === account) continue;
          if ((await this.names.claim(account, slug, id, by)) === 'taken') continue;
          claimed.push(slug);
        }
        let agent: AgentRecord;
        try {
          agent = await this.r.agents.insert({
            id,
            account_id: account,
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
        const lost = await this.names.lost(agent, by);
        if (lost) {
          // Nothing refers to it yet: its main branch comes after.
          await this.r.agents.delete({ id: agent.id, account_id: account });
          if (lost === 'id') throw AGENTS.AGENT_ID_IS_SLUG();
          continue;
        }
        stored = agent;
        return { agent, main: await mainBranch(this.r, agent) };
      }
    } finally {
      // A create that failed (or a slug it gave up) leaves no claim behind to hold the name for a minute. A
      // release that fails leaves them to go stale, as a crash does: the create's own outcome stands.
      const left = claimed.filter((name) => name !== stored?.id && name !== stored?.slug);
      if (left.length > 0) await this.names.release(account, left, id, by).catch(() => undefined);
    }
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
