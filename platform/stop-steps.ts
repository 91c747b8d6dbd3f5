/**
 * The steps of a stop (a drain, or a stop during start-up), one sequence for every thread that closes what it
 * opened: each step runs whatever failed before it, and a failure is logged at warn and passed over. A step that
 * threw would otherwise skip the closes after it: a store closed under a projection thread still reading it, or
 * the edge thread ended mid-drain (the main thread then exits 1 at once, its own store open).
 */
import type { Logger } from 'pino';

export interface StopSteps {
  /** Runs `f`; a failure is logged with the step's name and does not stop the sequence. */
  step(name: string, f: () => unknown): Promise<void>;
  /** Whether the `store` step (if it ran) closed the store: a drain that could not exits 1. */
  storeClosed(): boolean;
}

/** A new sequence of stop steps logging to `logger`. */
export function createStopSteps(logger: Pick<Logger, 'warn'>): StopSteps {
  let storeClosed = true;
  return {
    async step(name, f) {
      try {
        await f();
      } catch (err) {
        if (name === 'store') storeClosed = false;
        logger.warn({ step: name, err: String(err instanceof Error ? err.message : err) }, 'a drain step failed; going on');
      }
    },
    storeClosed: () => storeClosed,
  };
}
