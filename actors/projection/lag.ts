/**
 * Commit-to-applied lag over a runner's most recent entries: a ring of the last `size` samples, from which
 * the percentiles are computed when reported (not per entry).
 */
export class LagWindow {
  private readonly samples: Float64Array;
  private next = 0;
  private count = 0;

  constructor(size = 2048) {
    this.samples = new Float64Array(size);
  }

  add(ms: number): void {
    this.samples[this.next] = ms;
    this.next = (this.next + 1) % this.samples.length;
    if (this.count < this.samples.length) this.count++;
  }

  /** p50 and p99 of the window (nearest rank), or null when it is empty. */
  summary(): { p50: number; p99: number; samples: number } | null {
    if (this.count === 0) return null;
    const sorted = this.samples.slice(0, this.count).sort();
    const at = (q: number) => sorted[Math.min(this.count - 1, Math.ceil(q * this.count) - 1)];
    return { p50: Math.round(at(0.5)), p99: Math.round(at(0.99)), samples: this.count };
  }
}
