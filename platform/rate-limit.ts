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
    /** Buckets untouched this long are forgotten (they would be full again). */
    private readonly forgetAfterMs = 10 * 60_000,
  ) {
    const sweep = setInterval(() => this.sweep(), Math.min(60_000, forgetAfterMs));
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

  private sweep(): void {
    const cutoff = Date.now() - this.forgetAfterMs;
    for (const [k, b] of this.buckets) if (b.at < cutoff) this.buckets.delete(k);
  }
}
