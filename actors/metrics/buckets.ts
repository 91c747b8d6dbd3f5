import type { Collection, Doc, Store } from '../../store/mod.js';
import { mergeInto, quantile, type Histogram } from './histogram.js';

/** The counted metrics a bucket holds. */
export const COUNTS = ['api_errors', 'function_errors', 'call_crashes', 'call_volume', 'turns'] as const;
export type Count = (typeof COUNTS)[number];

/**
 * One minute of one scope's metrics, from one lane of the journal (`metric_buckets`). A scope is a project
 * (`p:<project_id>`) or an account (`a:<account_id>`, every project of it). A lane is a partition of the
 * journal (`<partition>/<count>`): one projection runner at a time applies a partition's entries, in seq order,
 * so `last_seq` makes re-applying an entry (after a crash) a no-op, while other partitions, perhaps applied by
 * other runners, write their own documents.
 */
export interface MetricBucket extends Doc {
  id: string;
  scope: string;
  /** Minutes since the epoch. */
  minute: number;
  lane: string;
  last_seq: number;
  counts: Record<Count, number>;
  /** Turn latency histogram (`histogram.ts`). */
  latency: Histogram;
}

export const projectScope = (projectId: string) => `p:${projectId}`;
export const accountScope = (accountId: string) => `a:${accountId}`;
/**
 * The width of a bucket: a minute (`METRICS_BUCKET_MS`, default 60000). Read from the environment here, not
 * passed in, because three places must agree on it and one of them is the projection runner's thread: the
 * edges' error counts, the projector and the rules' windows (a `5m` window spans 5 buckets and reads 6).
 * Operators keep the minute; tests shorten it so that a window can empty within a test.
 */
export const BUCKET_MS = bucketMsOf(process.env.METRICS_BUCKET_MS);

/**
 * `METRICS_BUCKET_MS` as platform/config.ts takes it: decimal digits, 10 to 60000; unset or blank, a minute. A
 * started platform has refused any other value at start; code loaded outside one (a unit test's) gets the minute.
 */
function bucketMsOf(value: string | undefined): number {
  const ms = value !== undefined && /^\d+$/.test(value) ? Number(value) : NaN;
  return ms >= 10 && ms <= 60_000 ? ms : 60_000;
}
export const minuteOf = (ms: number) => Math.floor(ms / BUCKET_MS);

/** The `metric_buckets` collection. */
export function metricBuckets(store: Store): Collection<MetricBucket> {
  return store.collection<MetricBucket>({ name: 'metric_buckets', indexes: [{ fields: ['scope', 'minute'] }], readModel: true });
}

/** A window's metrics summed over its minutes and lanes. */
export interface WindowSums {
  /** Whether any bucket was written in the window (any traffic or error of the scope). */
  hasData: boolean;
  counts: Record<Count, number>;
  latency: Histogram;
}

export const emptyCounts = (): Record<Count, number> => ({ api_errors: 0, function_errors: 0, call_crashes: 0, call_volume: 0, turns: 0 });

/**
 * Sums the scope's buckets that overlap the window of `minutes` buckets ending at `at`: the one holding `at` and
 * the `minutes` before it. A bucket is read whole, so the window holds every event of its span, and at most a
 * bucket's width more: the window's first bucket starts before it (a window read short, the current bucket and
 * the `minutes - 1` before it, lost events well within its span).
 */
export async function readWindow(store: Store, scope: string, at: number, minutes: number): Promise<WindowSums> {
  const last = minuteOf(at);
  const docs = await metricBuckets(store).find({ scope, minute: { $gte: last - minutes, $lte: last } });
  return sumBuckets(docs);
}

/** Adds buckets up. */
export function sumBuckets(docs: MetricBucket[]): WindowSums {
  const counts = emptyCounts();
  const latency: Histogram = {};
  for (const d of docs) {
    for (const c of COUNTS) counts[c] += d.counts[c] ?? 0;
    mergeInto(latency, d.latency);
  }
  return { hasData: docs.length > 0, counts, latency };
}

/** The metrics of the alert rules (contract 2.3). */
export type MetricName = 'turn_latency_p50' | 'turn_latency_p95' | 'api_errors' | 'function_errors' | 'call_crashes' | 'call_volume';

/**
 * A metric's value over a window, or null when the window has no data: no bucket at all, or for the
 * latency percentiles no turn.
 */
export function metricValue(sums: WindowSums, metric: MetricName): number | null {
  if (!sums.hasData) return null;
  switch (metric) {
    case 'turn_latency_p50': return quantile(sums.latency, 0.5);
    case 'turn_latency_p95': return quantile(sums.latency, 0.95);
    default: return sums.counts[metric];
  }
}
