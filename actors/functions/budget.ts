/**
 * How much longer than its limit, in wall-clock time, a call may take while it has not used its limit of CPU time.
 * The host's kill of a process that does not answer in time counts from the same factor (`process.ts`).
 */
export const WALL_FACTOR = 4;

/**
 * One call's time limit, as its sandbox process measures it: `limitMs` of the process's CPU time, so that a call
 * slowed down by others (more sandbox processes than cores, another tenant's loops in the process beside it) is
 * not failed for their work, and at most `WALL_FACTOR` times that in wall-clock time, so that a call starved of CPU
 * still ends. A sandbox process serves one call at a time, so its CPU time is the call's. The CPU clock (a system
 * call) is read only once the wall clock has passed the limit: a call within it costs one `Date.now()` per check.
 */
export class Budget {
  private readonly soft: number;
  private readonly hard: number;
  private readonly cpuAtStart: number;

  constructor(readonly limitMs: number) {
    const now = Date.now();
    this.soft = now + limitMs;
    this.hard = now + limitMs * WALL_FACTOR;
    const cpu = process.cpuUsage();
    this.cpuAtStart = cpu.user + cpu.system;
  }

  /** Whether the call has used its time: its CPU time, or `WALL_FACTOR` times it on the wall clock. */
  get spent(): boolean {
    const now = Date.now();
    if (now <= this.soft) return false;
    if (now > this.hard) return true;
    const cpu = process.cpuUsage();
    return (cpu.user + cpu.system - this.cpuAtStart) / 1000 > this.limitMs;
  }
}
