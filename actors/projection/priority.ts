import { readFileSync, readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/**
 * The projection thread's CPU priority. The read models are behind the reply path by design, so while the
 * runner keeps up its thread runs at a lower priority (a higher `nice`) and leaves the cores to the threads
 * that answer: the actors' event loop, the edge, the socket gateway (bench/README.md, twenty-sixth session).
 * Once the oldest entry the runner reads is `behindMs` old, the thread takes its normal priority back, so the
 * lag stays bounded when the cores are saturated; it yields again once it is within half of that.
 *
 * Linux only (a thread's own `nice`, set through its thread id). Taking the priority back lowers the `nice`
 * value, which needs `CAP_SYS_NICE` or an `RLIMIT_NICE` that allows it: without either, the thread is left at
 * normal priority, as it would otherwise be stuck at the lower one.
 */
export class ThreadPriority {
  private yielding = false;

  private constructor(
    private readonly tid: number,
    private readonly base: number,
    private readonly nice: number,
    private readonly behindMs: number,
  ) {}

  /**
   * The calling thread's priority, `nice` steps lower (at most to 19) while the runner is less than `behindMs`
   * behind. `priority` is null where the thread does not yield: `nice` 0, not Linux, already at 19, or without
   * the permission to take its priority back, which `unable` then explains for the start-up log.
   */
  static ofThisThread(nice: number, behindMs: number): { priority: ThreadPriority } | { priority: null; unable?: string } {
    const tid = threadId();
    if (tid === null || nice <= 0) return { priority: null };
    const base = getPriority(tid);
    const lower = Math.min(19, base + nice);
    if (lower === base) return { priority: null };
    if (!mayLowerNiceTo(base)) {
      return {
        priority: null,
        unable:
          `the projection thread runs at normal priority: yielding the CPU while it keeps up needs the permission to take its priority back (CAP_SYS_NICE, or RLIMIT_NICE of at least ${20 - base}: ` +
          `LimitNICE=${base < 0 ? '' : '+'}${base} in a systemd unit, --ulimit nice=${20 - base} for Docker, ulimit -e ${20 - base}); PROJECTION_NICE=0 turns yielding off without this warning`,
      };
    }
    const p = new ThreadPriority(tid, base, lower, behindMs);
    p.set(true);
    return { priority: p };
  }

  /** Whether the thread runs at the lower priority now. */
  get isYielding(): boolean {
    return this.yielding;
  }

  /** How far behind the runner is: the age in ms of the oldest entry it read in a cycle. */
  observe(behindMs: number): void {
    if (this.yielding && behindMs > this.behindMs) this.set(false);
    else if (!this.yielding && behindMs < this.behindMs / 2) this.set(true);
  }

  private set(yielding: boolean): void {
    try {
      setPriority(this.tid, yielding ? this.nice : this.base);
      this.yielding = yielding;
    } catch {
      // The limits changed under us; the priority stays as it was.
    }
  }
}

/** The calling thread's Linux thread id, or null. */
function threadId(): number | null {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isInteger(tid) && tid > 0 ? tid : null;
  } catch {
    return null;
  }
}

/** CAP_SYS_NICE's bit in the capability sets of /proc/self/status. */
const CAP_SYS_NICE = 23n;

/** Whether this process may set a thread's `nice` back down to `base` once it has raised it. */
function mayLowerNiceTo(base: number): boolean {
  try {
    const caps = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (caps && (BigInt(`0x${caps[1]}`) >> CAP_SYS_NICE) & 1n) return true;
    // RLIMIT_NICE: the lowest nice value allowed is 20 minus the soft limit.
    const limit = /^Max nice priority\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (!limit) return false;
    const soft = limit[1] === 'unlimited' ? 40 : Number(limit[1]);
    return 20 - soft <= base;
  } catch {
    return false;
  }
}
