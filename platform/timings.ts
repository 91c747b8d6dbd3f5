/**
 * Step timings for finding where a request's time goes, off unless `SB_TIMINGS=1`: then named steps
 * (`timings?.since('step', t0)`) are summed per name and printed as a table on stdout when the process
 * exits. Off, `timings` is null and each call site costs one null check. Measurement only: nothing reads it.
 */
class Timings {
  private readonly steps = new Map<string, { n: number; sum: number; max: number; values: number[] }>();

  /** Records `performance.now() - t0` (ms) under `step`. */
  since(step: string, t0: number): void {
    this.add(step, performance.now() - t0);
  }

  /** Records a value (ms, or a count) under `step`. */
  add(step: string, value: number): void {
    let s = this.steps.get(step);
    if (!s) this.steps.set(step, (s = { n: 0, sum: 0, max: 0, values: [] }));
    s.n++;
    s.sum += value;
    if (value > s.max) s.max = value;
    // A reservoir of the first 200,000 values is plenty for percentiles of a benchmark run.
    if (s.values.length < 200_000) s.values.push(value);
  }

  report(): string {
    const rows = [...this.steps].map(([name, s]) => {
      const sorted = s.values.sort((a, b) => a - b);
      const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
      return `${name.padEnd(28)} n ${String(s.n).padStart(8)}  mean ${(s.sum / s.n).toFixed(3).padStart(9)}  p50 ${at(0.5).toFixed(3).padStart(9)}  p99 ${at(0.99).toFixed(3).padStart(9)}  max ${s.max.toFixed(3).padStart(9)}`;
    });
    return `timings (ms unless a count):\n${rows.join('\n')}\n`;
  }
}

export const timings: Timings | null = process.env.SB_TIMINGS === '1' ? new Timings() : null;

if (timings) process.on('exit', () => process.stdout.write(timings.report()));
