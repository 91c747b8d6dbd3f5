import { fromTask } from './task.js';

/**
 * The longest delay one `setTimeout` can take: Node fires a longer one after 1 ms (with a
 * `TimeoutOverflowWarning`), so a far deadline is slept in steps of at most this.
 */
export const MAX_TIMER_STEP_MS = 2 ** 31 - 1;

/** The clock a durable timer sleeps on; injectable so tests can count arms without waiting. */
export interface TimerClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The process's own clock. */
export const systemClock: TimerClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * `sleepUntil` on a given clock: resolves with the time it fired, at or after `input.until`. Each arm waits
 * for what is left, capped at `MAX_TIMER_STEP_MS`, and wakes to re-arm until the deadline has passed, so a
 * deadline months away costs one timer per step instead of firing at once.
 */
export function sleepUntilOn(clock: TimerClock) {
  return fromTask<number, { until: number }>((input) => {
    let timer: unknown;
    const done = new Promise<number>((resolve) => {
      // Node may also fire a timer a millisecond early by the wall clock: the same re-arm covers that.
      const arm = () => {
        const left = Math.min(MAX_TIMER_STEP_MS, Math.max(0, input.until - clock.now()));
        timer = clock.setTimeout(() => (clock.now() >= input.until ? resolve(clock.now()) : arm()), left);
      };
      arm();
    });
    return { done, cancel: () => clock.clearTimeout(timer) };
  });
}

/**
 * The durable timer every machine uses instead of `after`: resolves with the time it fired, at or after
 * `input.until`. Its input is an absolute deadline, so a persisted snapshot carries it and a restored actor
 * (XState restarts invoked promise actors on restore) sleeps only for what is left. Stopping it (the state
 * that invoked it is left) clears its timer.
 */
export const sleepUntil = sleepUntilOn(systemClock);

/** The logic name machines invoke for durable timers. */
export const SLEEP_SRC = 'sleepUntil';

/**
 * The pending durable timers of a persisted snapshot, searched through nested children: the invoking
 * child's path (`parent.child`) and its deadline (ms since epoch).
 */
export function pendingDeadlines(persisted: unknown): Array<{ id: string; until: number }> {
  const found: Array<{ id: string; until: number }> = [];
  const visit = (snapshot: unknown, path: string) => {
    const children = (snapshot as { children?: Record<string, { src?: unknown; snapshot?: any }> })?.children;
    for (const [id, child] of Object.entries(children ?? {})) {
      const until = child?.snapshot?.input?.until;
      if (child?.src === SLEEP_SRC && child.snapshot?.status === 'active' && typeof until === 'number') found.push({ id: path + id, until });
      visit(child?.snapshot, `${path}${id}.`);
    }
  };
  visit(persisted, '');
  return found;
}

/**
 * The earliest pending durable-timer deadline in a persisted snapshot, or null. The host stores it with the
 * snapshot so that a passivated actor is woken on time.
 */
export function earliestDeadline(persisted: unknown): number | null {
  const deadlines = pendingDeadlines(persisted);
  return deadlines.length ? Math.min(...deadlines.map((d) => d.until)) : null;
}
