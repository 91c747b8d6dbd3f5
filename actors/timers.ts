import { fromTask } from './task.js';

/**
 * The durable timer every machine uses instead of `after`: resolves with the time it fired, at or after
 * `input.until`. Its input is an absolute deadline, so a persisted snapshot carries it and a restored actor
 * (XState restarts invoked promise actors on restore) sleeps only for what is left. Stopping it (the state
 * that invoked it is left) clears its timer.
 */
export const sleepUntil = fromTask<number, { until: number }>((input) => {
  let timer: NodeJS.Timeout;
  const done = new Promise<number>((resolve) => {
    // Node may fire a timer a millisecond early by the wall clock: re-arm until the deadline has passed.
    const arm = () => {
      const left = input.until - Date.now();
      timer = setTimeout(() => (Date.now() >= input.until ? resolve(Date.now()) : arm()), Math.max(0, left));
    };
    arm();
  });
  return { done, cancel: () => clearTimeout(timer) };
});

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
