import { fromPromise } from 'xstate';

/**
 * The durable timer every machine uses instead of `after`: resolves with the time it fired, at or after
 * `input.until`. Its input is an absolute deadline, so a persisted snapshot carries it and a restored actor
 * (XState restarts invoked promise actors on restore) sleeps only for what is left.
 */
export const sleepUntil = fromPromise<number, { until: number }>(
  ({ input, signal }) =>
    new Promise<number>((resolve) => {
      let timer: NodeJS.Timeout;
      // Node may fire a timer a millisecond early by the wall clock: re-arm until the deadline has passed.
      const arm = () => {
        const left = input.until - Date.now();
        timer = setTimeout(() => (Date.now() >= input.until ? resolve(Date.now()) : arm()), Math.max(0, left));
      };
      arm();
      signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
    }),
);

/** The logic name machines invoke for durable timers. */
export const SLEEP_SRC = 'sleepUntil';

/**
 * The earliest pending durable-timer deadline in a persisted snapshot (searched through nested children),
 * or null. The host stores it with the snapshot so that a passivated actor is woken on time.
 */
export function earliestDeadline(persisted: unknown): number | null {
  let earliest: number | null = null;
  const visit = (snapshot: unknown) => {
    const children = (snapshot as { children?: Record<string, { src?: unknown; snapshot?: any }> })?.children;
    if (!children) return;
    for (const child of Object.values(children)) {
      const until = child?.snapshot?.input?.until;
      if (child?.src === SLEEP_SRC && child.snapshot?.status === 'active' && typeof until === 'number') {
        earliest = earliest === null ? until : Math.min(earliest, until);
      }
      visit(child?.snapshot);
    }
  };
  visit(persisted);
  return earliest;
}
