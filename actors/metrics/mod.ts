/**
 * The alert metrics (contract 2.3) as per-minute buckets projected from the journal: what the alert rules
 * read and the edge feeds with its 5xx counts. Gateways, `platform/` and `bin/` import this file only.
 *
 * @module
 */
export { metricsProjector, METRICS_PROJECTOR, CRASH_REASONS } from './projector.js';
export { EdgeErrorCounter, DEFAULT_EDGE_ERRORS_FLUSH_MS } from './edge-errors.js';
export { readWindow, sumBuckets, metricValue, metricBuckets, projectScope, accountScope, minuteOf, COUNTS, type MetricBucket, type WindowSums, type MetricName, type Count } from './buckets.js';
export { LATENCY_BOUNDS, bucketOf, quantile, mergeInto, type Histogram } from './histogram.js';
