/**
 * Work waiting for a scarce resource, queued per project, with projects grouped by account: project functions'
 * calls waiting for a sandbox process (`actors/functions/sandbox.ts`), and webhook deliveries' name lookups waiting
 * for one of libuv's threads (`actors/delivery/lookup.ts`, an account being its own single project there).
 *
 * An account runs at most `quota` calls at once across its projects, and a project at most `quota`. When a
 * process frees up, the next call comes from the account with the fewest calls running, and within it from the
 * project with the fewest calls running, the least recently served first among equals at each level. Every call
 * is bounded by its time limit, so an account whose functions spin, in however many projects it creates, holds at
 * most `quota` processes, each for at most one call's limit (its wall-clock bound, `budget.ts`): another account's
 * call waits no longer than that for its turn.
 */
export class FairQueue<T> {
  private readonly queues = new Map<string, T[]>();
  /** The account of each project with calls waiting or running. */
  private readonly accountOf = new Map<string, string>();
  /** Per project and per account (kept apart by prefix): calls running, and when last served. */
  private readonly running = new Map<string, number>();
  private readonly servedAt = new Map<string, number>();
  private served = 0;
  private size = 0;

  constructor(
    private readonly quota: number,
    private readonly maxQueuedPerProject: number,
  ) {}

  /** Queues an item; false when the project already has `maxQueuedPerProject` waiting. */
  push(account: string, project: string, item: T): boolean {
    let q = this.queues.get(project);
    if (!q) this.queues.set(project, (q = []));
    if (q.length >= this.maxQueuedPerProject) return false;
    this.accountOf.set(project, account);
    q.push(item);
    this.size++;
    return true;
  }

  get length(): number {
    return this.size;
  }

  /** Takes the next item that may run now (and counts it as running), or null. */
  take(): { project: string; item: T } | null {
    const better = (key: string, best: string | null) => {
      if (best === null) return true;
      const running = this.running.get(key) ?? 0;
      const bestRunning = this.running.get(best) ?? 0;
      return running < bestRunning || (running === bestRunning && (this.servedAt.get(key) ?? -1) < (this.servedAt.get(best) ?? -1));
    };
    let bestAccount: string | null = null;
    for (const project of this.queues.keys()) {
      const account = accountKey(this.accountOf.get(project)!);
      if ((this.running.get(account) ?? 0) >= this.quota || (this.running.get(project) ?? 0) >= this.quota) continue;
      if (account !== bestAccount && better(account, bestAccount)) bestAccount = account;
    }
    if (bestAccount === null) return null;
    let best: string | null = null;
    for (const project of this.queues.keys()) {
      if (accountKey(this.accountOf.get(project)!) !== bestAccount || (this.running.get(project) ?? 0) >= this.quota) continue;
      if (better(project, best)) best = project;
    }
    const q = this.queues.get(best!)!;
    const item = q.shift()!;
    if (q.length === 0) this.queues.delete(best!);
    this.size--;
    this.served++;
    for (const key of [best!, bestAccount]) {
      this.running.set(key, (this.running.get(key) ?? 0) + 1);
      this.servedAt.set(key, this.served);
    }
    return { project: best!, item };
  }

  /** A call taken with `take` has finished. */
  done(project: string): void {
    const account = accountKey(this.accountOf.get(project) ?? '');
    for (const key of [project, account]) {
      const n = (this.running.get(key) ?? 1) - 1;
      if (n > 0) this.running.set(key, n);
      else this.running.delete(key);
    }
    if (!this.running.has(project) && !this.queues.has(project)) {
      this.servedAt.delete(project);
      this.accountOf.delete(project);
    }
    if (!this.running.has(account) && ![...this.accountOf.values()].some((a) => accountKey(a) === account)) this.servedAt.delete(account);
  }

  /** Removes and returns every queued item `expired` selects (calls that waited past their bound). */
  drop(expired: (item: T) => boolean): T[] {
    const out: T[] = [];
    for (const [project, q] of this.queues) {
      const keep: T[] = [];
      for (const item of q) (expired(item) ? out : keep).push(item);
      this.size -= q.length - keep.length;
      if (keep.length > 0) this.queues.set(project, keep);
      else {
        this.queues.delete(project);
        if (!this.running.has(project)) this.accountOf.delete(project);
      }
    }
    return out;
  }

  /** Removes and returns everything queued. */
  clear(): T[] {
    const out = [...this.queues.values()].flat();
    for (const project of this.queues.keys()) if (!this.running.has(project)) this.accountOf.delete(project);
    this.queues.clear();
    this.size = 0;
    return out;
  }
}

/** An account's key among the projects' (project ids never start with this). */
const accountKey = (account: string) => `\u0000${account}`;
