/**
 * A bounded map for what a projector keeps per live actor between batches (a conversation's folded record,
 * its analysed terms), so that the next entry of a busy actor is applied without reading its read model back.
 *
 * Least recently used goes first, but only once it has been idle for `idleMs`. Plain LRU misses on every
 * use when more actors are live than the cache holds and they take turns in a cycle (a messaging load of
 * 5,000 sessions against 4,096 entries missed every time: each entry was evicted just before its next
 * turn, bench/README.md, eighth session). Here, while every entry was used within `idleMs`, a new one is
 * simply not kept: the cache goes on hitting for the actors it holds, and only the overflow pays the read.
 * An entry whose actor went quiet (ended where this runner did not see it, passivated, moved to another
 * runner) is evicted as soon as room is needed.
 */
export class LiveCache<V> {
  private readonly entries = new Map<string, { value: V; used: number }>();

  constructor(
    private readonly capacity: number,
    private readonly idleMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Removes and returns the entry of `id`: the caller keeps it again with `set` once it has applied its entries. */
  take(id: string): V | undefined {
    const e = this.entries.get(id);
    if (!e) return undefined;
    this.entries.delete(id);
    return e.value;
  }

  /**
   * Keeps `value` as the most recently used entry, making room by evicting the least recently used entry if
   * that one has been idle for `idleMs`; otherwise, with the cache full, `value` is not kept.
   * Returns whether it was kept.
   */
  set(id: string, value: V): boolean {
    const now = this.now();
    this.entries.delete(id);
    if (this.entries.size >= this.capacity) {
      const [oldest, e] = this.entries.entries().next().value as [string, { used: number }];
      if (now - e.used < this.idleMs) return false;
      this.entries.delete(oldest);
    }
    this.entries.set(id, { value, used: now });
    return true;
  }

  delete(id: string): void {
    this.entries.delete(id);
  }

  clear(): void {
    this.entries.clear();
  }
}
