import { randomUUID } from 'node:crypto';
import { StoreDuplicateError } from '../store/mod.js';
import type { AgentRecord, BuilderRecords } from './records.js';

/**
 * How old a claim on a name must be, with no agent holding the name, before another create may take it over
 * (`NameClaims.claim`). A create stores its agent a few store round trips after claiming its names; a claim left
 * this long without its agent is one a crash (a killed process) interrupted.
 */
export const NAME_CLAIM_STALE_MS = 60_000;

/** Whose a name of an account is, as the store decided it: this create's, or another's. */
export type ClaimOutcome = 'ours' | 'taken';

/**
 * Claims on the names of an account's agents. An agent is addressed by its id or its slug, so within an account
 * no name may be both one agent's id and another's slug. Two creates at the same moment each check the other's
 * name before the other is stored; the claim decides between them instead: both the id and the slug path insert
 * `{accountId}/{name}`, and the store's primary key lets exactly one in, whatever the interleaving.
 *
 * A claim is the name's for good once an agent of the account holds it (as id or slug). One no agent holds is a
 * create still under way, or one a crash interrupted (or that lost its agent's id to another create of the same
 * id): once it is NAME_CLAIM_STALE_MS old, the next create of that name takes it over (a compare-and-set), so
 * a crash never loses a name. Agents stored before claims existed hold none: the lookups before a create see
 * them (they are stored, not racing), the claims settle only the creates that race each other.
 *
 * A create that does not store its agent (a store error, or its chosen id taken by a create that raced it)
 * releases the claims it wrote (`release`): else its retry would find its own name taken by itself for a
 * minute (a suffixed slug, or a 409 for that name as an `agentId`). Each claim written carries its create's
 * token (`by`), so a create releases only what it wrote, never a claim another create wrote or took over.
 */
export class NameClaims {
  constructor(private readonly r: BuilderRecords) {}

  /** A token for one create: what its claims carry as `by` (`claim`, `release`). */
  newCreate(): string {
    return randomUUID();
  }

  /**
   * Claims `name` in `accountId` for the agent `agentId` is creating, for the create `by` (`newCreate`).
   * `ours` when the store took this claim, when the name was already claimed for the same agent id (a retried
   * or concurrent create of one chosen `agentId`: the agent's insert decides between them), or when a stale
   * claim was taken over; `taken` when another agent holds the name or another create claimed it less than
   * NAME_CLAIM_STALE_MS ago.
   */
  async claim(accountId: string, name: string, agentId: string, by: string): Promise<ClaimOutcome> {
    const id = claimId(accountId, name);
    for (;;) {
      try {
        await this.r.nameClaims.insert({ id, account_id: accountId, name, agent_id: agentId, at: Date.now(), by });
        return 'ours';
      } catch (err) {
        if (!(err instanceof StoreDuplicateError)) throw err;
      }
      const held = await this.r.nameClaims.get(id);
      if (!held) continue; // Released meanwhile: claim it again.
      if (held.agent_id === agentId) return 'ours';
      if (holds(await this.r.agents.get(held.agent_id), accountId, name) || Date.now() - held.at < NAME_CLAIM_STALE_MS) return 'taken';
      const taken = await this.r.nameClaims.update({ id, agent_id: held.agent_id, at: held.at }, { $set: { agent_id: agentId, at: Date.now(), by } });
      if (taken) return 'ours';
      // Another create took it over, or its own create came back to it, first: judge the claim as it is now.
    }
  }

  /**
   * Releases the claims the create `by` wrote on `names` for `agentId`, save those an agent stored with that id
   * answers to: a create of the same chosen `agentId` that raced this one and stored it holds them now. A claim
   * another create wrote (or took over) since carries its token, and stays.
   */
  async release(accountId: string, names: Iterable<string>, agentId: string, by: string): Promise<void> {
    const stored = await this.r.agents.get(agentId);
    for (const name of new Set(names)) {
      if (holds(stored, accountId, name)) continue;
      await this.r.nameClaims.delete({ id: claimId(accountId, name), agent_id: agentId, by });
    }
  }

  /**
   * Which claim of `agent` (on its id, on its slug) no longer names it, read after it was stored by the create
   * `by`, or null when both do. Only a create that stalled past NAME_CLAIM_STALE_MS between claiming and storing
   * can have lost one, to another create that took the claim over meanwhile; the agent must then give way. A
   * claim found released (another create of the same chosen `agentId`, which failed, wrote it and released it
   * before this agent was stored) is claimed again: the name is free, unless a create claimed it meanwhile.
   */
  async lost(agent: AgentRecord, by: string): Promise<'id' | 'slug' | null> {
    const ours = async (name: string) => {
      const held = await this.r.nameClaims.get(claimId(agent.account_id, name));
      if (held) return held.agent_id === agent.id;
      return (await this.claim(agent.account_id, name, agent.id, by)) === 'ours';
    };
    if (!(await ours(agent.id))) return 'id';
    if (agent.slug !== agent.id && !(await ours(agent.slug))) return 'slug';
    return null;
  }
}

const claimId = (accountId: string, name: string): string => `${accountId}/${name}`;

/** Whether `agent` is one of the account's and answers to `name`. */
const holds = (agent: AgentRecord | null, accountId: string, name: string): boolean =>
  agent !== null && agent.account_id === accountId && (agent.id === name || agent.slug === name);
