/**
 * Commit-to-applied lag over a runner's most recent entries: a ring of the last `size` samples, from which
 * the percentiles are computed when reported (not per entry), and at most every `SUMMARY_EVERY_MS`: the runner
 * reports after every cycle, and sorting the whole ring each time cost as much as folding the records.
 */
export class LagWindow {
  private readonly samples: Float64Array;
  private next = 0;
  private count = 0;
  private added = 0;
  private cached: LagSummary | null = null;
  private cachedAt = 0;

  constructor(size = 2048) {
    this.samples = new Float64Array(size);
  }

  add(ms: number): void {
    this.samples[this.next] = ms;
    this.next = (this.next + 1) % this.samples.length;
    if (this.count < this.samples.length) this.count++;
    this.added++;
  }

  /**
   * p50 and p99 of the window (nearest rank), or null when it is empty. The summary of `now` (ms) is the one
   * computed last when it is less than `SUMMARY_EVERY_MS` old or no sample came since.
   */
  summary(now: number): LagSummary | null {
    if (this.count === 0) return null;
    if (this.cached && (this.added === 0 || now - this.cachedAt < SUMMARY_EVERY_MS)) return this.cached;
    const sorted = this.samples.slice(0, this.count).sort();
    const at = (q: number) => sorted[Math.min(this.count - 1, Math.ceil(q * this.count) - 1)];
    this.cached = { p50: Math.round(at(0.5)), p99: Math.round(at(0.99)), samples: this.count };
    this.cachedAt = now;
    this.added = 0;
    return this.cached;
  }
}

export interface LagSummary {
  p50: number;
  p99: number;
  samples: number;
}

/** How long a computed summary is reported before the window is sorted again. */
export const SUMMARY_EVERY_MS = 200;
