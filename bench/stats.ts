import * as hdr from 'hdr-histogram-js';

/** A latency recorder (microsecond resolution) with the percentiles the README reports. */
export function latencyRecorder() {
  const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  return {
    /** Records one latency given in milliseconds (fractional). */
    record: (ms: number) => h.recordValue(Math.max(1, Math.round(ms * 1000))),
    summary: () => ({
      count: h.totalCount,
      p50: h.getValueAtPercentile(50) / 1000,
      p99: h.getValueAtPercentile(99) / 1000,
      max: h.maxValue / 1000,
    }),
  };
}

/**
 * Runs `op` from `concurrency` loops for `durationMs` and returns the rate and latency percentiles. Every
 * call is timed from just before it starts to when it settles.
 */
export async function closedLoop(op: (i: number) => Promise<unknown>, concurrency: number, durationMs: number) {
  const lat = latencyRecorder();
  const end = performance.now() + durationMs;
  let done = 0;
  let errors = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, lane) => {
      let i = lane;
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          await op(i);
          lat.record(performance.now() - t0);
          done++;
        } catch {
          errors++;
        }
        i += concurrency;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { perSecond: done / seconds, errors, ...lat.summary() };
}

export const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
