/**
 * Turn latency as a mergeable histogram: fixed bucket bounds (ms), so the histograms of many minutes (and of
 * many lanes of one minute) add up bucket by bucket and a 5, 10 or 60 minute percentile is read from their
 * sum. Resolution: 5 ms up to 100 ms, 25 ms up to 1 s, 250 ms up to 10 s, 2.5 s up to 60 s; one overflow
 * bucket above. A percentile is the upper bound of the bucket holding its rank (the overflow reads as 60 s).
 */

function bounds(): number[] {
  const b: number[] = [];
  for (let v = 5; v <= 100; v += 5) b.push(v);
  for (let v = 125; v <= 1000; v += 25) b.push(v);
  for (let v = 1250; v <= 10_000; v += 250) b.push(v);
  for (let v = 12_500; v <= 60_000; v += 2500) b.push(v);
  return b;
}

/** Upper bounds (inclusive, ms) of the buckets; index `LATENCY_BOUNDS.length` is the overflow bucket. */
export const LATENCY_BOUNDS: readonly number[] = bounds();

/** A sparse histogram: bucket index → count. */
export type Histogram = Record<string, number>;

/** The bucket index of a latency. */
export function bucketOf(ms: number): number {
  let lo = 0;
  let hi = LATENCY_BOUNDS.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ms <= LATENCY_BOUNDS[mid]) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Adds `from` into `into` (mutates `into`). */
export function mergeInto(into: Histogram, from: Histogram | undefined): Histogram {
  if (from) for (const k in from) into[k] = (into[k] ?? 0) + from[k];
  return into;
}

/** The `q` quantile (0 < q ≤ 1) in ms, or null for an empty histogram. */
export function quantile(h: Histogram, q: number): number | null {
  const entries = Object.entries(h).map(([k, n]) => [Number(k), n] as const).filter(([, n]) => n > 0).sort((a, b) => a[0] - b[0]);
  const total = entries.reduce((s, [, n]) => s + n, 0);
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (const [i, n] of entries) {
    seen += n;
    if (seen >= rank) return LATENCY_BOUNDS[Math.min(i, LATENCY_BOUNDS.length - 1)];
  }
  return LATENCY_BOUNDS[LATENCY_BOUNDS.length - 1];
}
