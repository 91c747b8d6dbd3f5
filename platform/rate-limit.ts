/**
 * Token buckets keyed by what is limited (an API key, a project, a connector, an access token, a session, a
 * client address). Each key refills at `ratePerSecond` up to `burst` tokens. Limits hold per process (edge
 * or gateway): a deployment with N of them admits up to N times the rate for a key whose traffic spreads
 * over them; they are there to cut floods, not to meter usage exactly.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    /** How often buckets that have refilled are forgotten. */
    private readonly sweepEveryMs = 60_000,
  ) {
    const sweep = setInterval(() => this.sweep(), sweepEveryMs);
    sweep.unref();
  }

  /** Takes one token: 0 when allowed, else the whole seconds until a token is available (for Retry-After). */
  take(key: string, now = Date.now()): number {
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.ratePerSecond);
    b.at = now;
    this.buckets.set(key, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / this.ratePerSecond));
  }

  /**
   * Forgets the buckets that are full again: a new one starts full, so nothing changes for their keys. A bucket
   * still refilling is kept, however long it has been untouched: at a low rate (a token every few minutes) one
   * forgotten after a fixed time would hand its key a whole burst early.
   */
  sweep(now = Date.now()): void {
    for (const [k, b] of this.buckets) if (b.tokens + ((now - b.at) / 1000) * this.ratePerSecond >= this.burst) this.buckets.delete(k);
  }

  /** How many keys have a bucket that is not full (what the limiter holds in memory). */
  get size(): number {
    return this.buckets.size;
  }
}
