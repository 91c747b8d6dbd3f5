import { StoreDuplicateError } from '../store/mod.js';
import { nowIso } from '../platform/clock.js';
import { AGENTS } from '../platform/errors.js';
import { newId } from '../platform/secrets.js';
import { MAIN } from './agents.js';
import { type Content, withDefaults } from './content.js';
import { threeWayMerge } from './merge.js';
import type { AgentRecord, BranchRecord, BuilderRecords } from './records.js';

const MAX_CAS_ATTEMPTS = 50;

/** Branches of an agent and the content edits made on them. */
export class Branches {
  constructor(private readonly r: BuilderRecords) {}

  /** Cuts a branch from main as it is now; main's content is recorded as the merge base. */
  async create(agent: AgentRecord, name: string): Promise<BranchRecord> {
    const main = await this.get(agent, MAIN);
    const now = nowIso();
    try {
      return await this.r.branches.insert({
        id: newId('br'),
        agent_id: agent.id,
        account_id: agent.account_id,
        name,
        status: 'open',
        base: main.content,
        content: structuredClone(main.content),
        rev: 0,
        created_at: now,
        updated_at: now,
        merged_at: null,
      });
    } catch (err) {
      if (err instanceof StoreDuplicateError) throw AGENTS.BRANCH_EXISTS();
      throw err;
    }
  }

  /** A branch of an agent by name, without an access check (for the runtime). */
  getById(agentId: string, name: string): Promise<BranchRecord | null> {
    return this.r.branches.findOne({ agent_id: agentId, name });
  }

  list(agent: AgentRecord): Promise<BranchRecord[]> {
    return this.r.branches.find({ agent_id: agent.id }, { sort: { created_at: 1 } });
  }

  /** A branch by id or by name. */
  async get(agent: AgentRecord, ref: string): Promise<BranchRecord> {
    const byId = await this.r.branches.get(ref);
    const branch = byId && byId.agent_id === agent.id ? byId : await this.r.branches.findOne({ agent_id: agent.id, name: ref });
    if (!branch) throw AGENTS.BRANCH_NOT_FOUND();
    return branch;
  }

  /**
   * Applies `change` to a branch's content as a compare-and-set on its revision, retrying when another
   * writer got in first, so concurrent edits never lose each other. A merged branch is read-only.
   */
  async edit<T>(agent: AgentRecord, ref: string, change: (content: Content) => T): Promise<{ branch: BranchRecord; result: T }> {
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const branch = await this.get(agent, ref);
      if (branch.status === 'merged') throw AGENTS.BRANCH_READ_ONLY();
      const content = withDefaults(structuredClone(branch.content));
      const result = change(content);
      // Open still: a merge marks the branch without a new revision, and an edit read before it must not land after.
      const updated = await this.r.branches.update(
        { id: branch.id, rev: branch.rev, status: 'open' },
        { $set: { content, rev: branch.rev + 1, updated_at: nowIso() } },
      );
      if (updated) return { branch: updated, result };
    }
    throw AGENTS.BRANCH_BUSY();
  }

  /**
   * Merges a branch into main (three-way, against the base it was cut from). Conflicts are a 409 naming the
   * fields; nothing changes then. The merged branch stays readable and becomes read-only.
   *
   * Main is written first, then the branch is marked merged on the revision that was merged. A branch edited
   * in between (an edit acknowledged while the merge ran) is merged again, from what was merged to what it holds
   * now, until the mark lands on the revision main has: a merge that answers 200 holds every edit acknowledged
   * before the branch turned read-only, and one that answers 409 BRANCH_BUSY (still moving after every attempt)
   * has only written what a retry completes.
   */
  async merge(agent: AgentRecord, ref: string): Promise<{ branch: BranchRecord; main: BranchRecord; applied: string[] }> {
    let branch = await this.get(agent, ref);
    if (branch.name === MAIN) throw AGENTS.MERGE_INTO_MAIN();
    if (branch.status === 'merged') throw AGENTS.BRANCH_MERGED();
    const applied = new Set<string>();
    // What main already holds of the branch: at first the base it was cut from.
    let mergedFrom: Content | null = branch.base;
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const theirs = branch;
      // The fields of the attempt that was written (`edit` may run the change again on a newer main).
      const { branch: main, result: taken } = await this.edit(agent, MAIN, (content) => {
        const outcome = threeWayMerge(withDefaults(mergedFrom ?? content), content, withDefaults(theirs.content));
        if (outcome.conflicts.length) {
          throw AGENTS.BRANCH_DIVERGED.withErrors(outcome.conflicts);
        }
        Object.assign(content, outcome.content);
        return outcome.applied;
      });
      for (const a of taken) applied.add(a);
      const now = nowIso();
      const merged = await this.r.branches.update(
        { id: theirs.id, rev: theirs.rev, status: 'open' },
        { $set: { status: 'merged', merged_at: now, updated_at: now } },
      );
      if (merged) return { branch: merged, main, applied: [...applied] };
      branch = await this.get(agent, theirs.id);
      // Another merge of the same branch got there first (what this one wrote, a three-way merge of the same
      // changes, is in main once).
      if (branch.status === 'merged') throw AGENTS.BRANCH_MERGED();
      mergedFrom = theirs.content;
    }
    throw AGENTS.BRANCH_BUSY();
  }
}
