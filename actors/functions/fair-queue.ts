/**
 * Calls waiting for a sandbox process, queued per project.
 *
 * A project runs at most `quota` calls at once, and when a process frees up the next call comes from the project
 * with the fewest calls running, the least recently served first among equals. Every call is bounded by its time
 * limit, so a project whose functions spin holds at most `quota` processes, each for at most one call's limit:
 * another project's call waits no longer than that for its turn.
 */
export class FairQueue<T> {
  private readonly queues = new Map<string, T[]>();
  private readonly running = new Map<string, number>();
  private readonly servedAt = new Map<string, number>();
  private served = 0;
  private size = 0;

  constructor(
    private readonly quota: number,
    private readonly maxQueuedPerProject: number,
  ) {}

  /** Queues an item; false when the project already has `maxQueuedPerProject` waiting. */
  push(project: string, item: T): boolean {
    let q = this.queues.get(project);
    if (!q) this.queues.set(project, (q = []));
    if (q.length >= this.maxQueuedPerProject) return false;
    q.push(item);
    this.size++;
    return true;
  }

  get length(): number {
    return this.size;
  }

  /** Takes the next item that may run now (and counts it as running), or null. */
  take(): { project: string; item: T } | null {
    let best: string | null = null;
    for (const project of this.queues.keys()) {
      const running = this.running.get(project) ?? 0;
      if (running >= this.quota) continue;
      if (best === null) {
        best = project;
        continue;
      }
      const bestRunning = this.running.get(best) ?? 0;
      if (running < bestRunning || (running === bestRunning && (this.servedAt.get(project) ?? -1) < (this.servedAt.get(best) ?? -1))) best = project;
    }
    if (best === null) return null;
    const q = this.queues.get(best)!;
    const item = q.shift()!;
    if (q.length === 0) this.queues.delete(best);
    this.size--;
    this.running.set(best, (this.running.get(best) ?? 0) + 1);
    this.servedAt.set(best, ++this.served);
    return { project: best, item };
  }

  /** A call taken with `take` has finished. */
  done(project: string): void {
    const n = (this.running.get(project) ?? 1) - 1;
    if (n <= 0) {
      this.running.delete(project);
      if (!this.queues.has(project)) this.servedAt.delete(project);
    } else this.running.set(project, n);
  }

  /** Removes and returns every queued item `expired` selects (calls that waited past their bound). */
  drop(expired: (item: T) => boolean): T[] {
    const out: T[] = [];
    for (const [project, q] of this.queues) {
      const keep: T[] = [];
      for (const item of q) (expired(item) ? out : keep).push(item);
      this.size -= q.length - keep.length;
      if (keep.length === 0) this.queues.delete(project);
      else this.queues.set(project, keep);
    }
    return out;
  }

  /** Removes and returns everything queued. */
  clear(): T[] {
    const out = [...this.queues.values()].flat();
    this.queues.clear();
    this.size = 0;
    return out;
  }
}
