import { StoreDuplicateError } from '../store/mod.js';
import { nowIso } from '../platform/clock.js';
import { AGENTS } from '../platform/errors.js';
import { newId } from '../platform/secrets.js';
import { type Content, emptyContent, withDefaults } from './content.js';
import { MAIN, mainBranch } from './main-branch.js';
import { threeWayMerge } from './merge.js';
import type { AgentRecord, BranchRecord, BuilderRecords } from './records.js';

const MAX_CAS_ATTEMPTS = 50;

/**
 * How old a merge's hold on its branch must be before the branch's next merge or edit settles it (`settled`).
 * A merge holds it for the few store round trips of one write on main; one held this long was interrupted (a
 * crash, a stopped process), so settling it races no merge that is still running.
 */
export const MERGE_LOCK_STALE_MS = 60_000;

/**
 * The most bytes a branch's content holds (its JSON as stored: behavior, topics, functions, variants, voice).
 * Every edit rewrites the whole branch, every read of it serializes it, a publish stores a copy as an artifact
 * and a worker loads it on a version's first turn, all on threads other accounts share: unbounded, a branch of
 * 400 topics of 100,000 characters (40 MB) took half a second an edit and seconds a read. 8 MiB holds a real
 * knowledge base (some 80 topics at the 100,000-character limit, or 2,000 of 4 KB, with the behavior and
 * functions beside them) and keeps each of those costs to a fraction of that.
 */
export const MAX_BRANCH_CONTENT_BYTES = 8 * 1024 * 1024;

/** The size `MAX_BRANCH_CONTENT_BYTES` bounds. */
const contentBytes = (content: Content): number => Buffer.byteLength(JSON.stringify(content));

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

  /** The main branch of an agent by its id, without an access check (for the runtime); null for no such agent. */
  async mainOf(agentId: string): Promise<BranchRecord | null> {
    const agent = await this.r.agents.get(agentId);
    return agent ? mainBranch(this.r, agent) : null;
  }

  /** The agent's branches, main first (stored now if a crash left it unmade: `mainBranch`). */
  async list(agent: AgentRecord): Promise<BranchRecord[]> {
    const found = await this.r.branches.find({ agent_id: agent.id }, { sort: { created_at: 1 } });
    if (found.some((b) => b.name === MAIN)) return found;
    await mainBranch(this.r, agent);
    return this.r.branches.find({ agent_id: agent.id }, { sort: { created_at: 1 } });
  }

  /** A branch by id or by name; `main` is there for every agent (`mainBranch`). */
  async get(agent: AgentRecord, ref: string): Promise<BranchRecord> {
    const byId = await this.r.branches.get(ref);
    const branch = byId && byId.agent_id === agent.id ? byId : await this.r.branches.findOne({ agent_id: agent.id, name: ref });
    if (branch) return branch;
    if (ref === MAIN) return mainBranch(this.r, agent);
    throw AGENTS.BRANCH_NOT_FOUND();
  }

  /**
   * Applies `change` to a branch's content as a compare-and-set on its revision, retrying when another
   * writer got in first, so concurrent edits never lose each other. A merged branch is read-only, and a branch a
   * merge holds takes no edits until the merge lands or is refused. An edit that would take the content past
   * MAX_BRANCH_CONTENT_BYTES is refused (BRANCH_TOO_LARGE) and writes nothing.
   */
  async edit<T>(agent: AgentRecord, ref: string, change: (content: Content) => T): Promise<{ branch: BranchRecord; result: T }> {
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const branch = await this.settled(agent, await this.get(agent, ref));
      if (branch.status === 'merged') throw AGENTS.BRANCH_READ_ONLY();
      if (branch.status === 'merging') throw AGENTS.BRANCH_MERGING();
      const content = withDefaults(structuredClone(branch.content));
      const result = change(content);
      // Every write that adds (an item, a longer text, a merge into main) is checked; one that leaves the branch no
      // larger is taken even past the limit (content stored before it), so such a branch can be cut down.
      const bytes = contentBytes(content);
      if (bytes > MAX_BRANCH_CONTENT_BYTES && bytes > contentBytes(withDefaults(branch.content))) throw AGENTS.BRANCH_TOO_LARGE(bytes);
      // Open still: a merge takes the branch without a new revision, and an edit read before it must not land after.
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
   * fields. The merged branch stays readable and becomes read-only. All or nothing: main holds the whole branch
   * when this answers, and none of it when it throws.
   *
   * The merge first takes the branch (`open` to `merging`, a compare-and-set), so the content it merges is
   * the branch's last: an edit acknowledged before landed before it, and one after is refused (BRANCH_MERGING).
   * Main is then written once, as a compare-and-set on its revision (redone on main as it is when another writer
   * got in first), and the branch marked merged. A conflict, or main moving on every attempt, writes nothing on
   * main and gives the branch back open. A merge a crash interrupts leaves its lock, which the branch's next
   * merge or edit settles once it is MERGE_LOCK_STALE_MS old (`settled`).
   */
  async merge(agent: AgentRecord, ref: string): Promise<{ branch: BranchRecord; main: BranchRecord; applied: string[] }> {
    const found = await this.get(agent, ref);
    if (found.name === MAIN) throw AGENTS.MERGE_INTO_MAIN();
    const branch = await this.settled(agent, found);
    if (branch.status === 'merged') throw AGENTS.BRANCH_MERGED();
    const token = newId('merge');
    const held = await this.r.branches.update({ id: branch.id, status: 'open' }, { $set: { status: 'merging', merge_lock: { token, at: Date.now() } } });
    if (!held) {
      // Another merge holds it, or got there first and merged it.
      if ((await this.get(agent, branch.id)).status === 'merged') throw AGENTS.BRANCH_MERGED();
      throw AGENTS.MERGE_UNDER_WAY();
    }
    let written: { branch: BranchRecord; result: string[] };
    try {
      written = await this.edit(agent, MAIN, (content) => {
        const outcome = threeWayMerge(withDefaults(held.base ?? emptyContent()), content, withDefaults(held.content));
        if (outcome.conflicts.length) throw AGENTS.BRANCH_DIVERGED.withErrors(outcome.conflicts);
        Object.assign(content, outcome.content);
        return outcome.applied;
      });
    } catch (err) {
      // Main was not written: the branch is open again. Were this release lost too, the lock would go stale.
      await this.r.branches.update({ id: held.id, status: 'merging', 'merge_lock.token': token }, { $set: { status: 'open' }, $unset: { merge_lock: '' } });
      throw err;
    }
    const now = nowIso();
    const merged = await this.r.branches.update(
      { id: held.id, status: 'merging', 'merge_lock.token': token },
      { $set: { status: 'merged', merged_at: now, updated_at: now }, $unset: { merge_lock: '' } },
    );
    // Null only when this merge stalled past MERGE_LOCK_STALE_MS and its lock was settled meanwhile: main holds
    // the whole branch all the same, and the branch is what the settling made it.
    return { branch: merged ?? (await this.get(agent, held.id)), main: written.branch, applied: written.result };
  }

  /**
   * The branch, with a merge lock older than MERGE_LOCK_STALE_MS (a merge a crash interrupted) settled: the
   * branch is marked merged when main holds every change it made (the interrupted merge wrote main, whose write
   * is whole), and is open again otherwise (it did not, or main has changed the same items since). A branch not
   * held, or held by a merge that may still be running, is returned as it is.
   */
  private async settled(agent: AgentRecord, branch: BranchRecord): Promise<BranchRecord> {
    const lock = branch.merge_lock;
    if (branch.status !== 'merging' || !lock || Date.now() - lock.at < MERGE_LOCK_STALE_MS) return branch;
    const main = await this.get(agent, MAIN);
    const outcome = threeWayMerge(withDefaults(branch.base ?? emptyContent()), withDefaults(main.content), withDefaults(branch.content));
    const holds = outcome.conflicts.length === 0 && outcome.applied.length === 0;
    const now = nowIso();
    const settled = await this.r.branches.update(
      { id: branch.id, status: 'merging', 'merge_lock.token': lock.token },
      { $set: holds ? { status: 'merged', merged_at: now, updated_at: now } : { status: 'open' }, $unset: { merge_lock: '' } },
    );
    // Null: another request settled it first.
    return settled ?? (await this.get(agent, branch.id));
  }
}
