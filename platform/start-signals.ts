/**
 * SIGTERM and SIGINT while a process is still starting. A role started before its NATS server waits for it
 * (actors/transport/nats-connect.ts), possibly for long; a process manager that stops it meanwhile expects the
 * exit 0 of a drain, promptly, not a kill after its grace period. Until the drain's own listeners replace these,
 * a signal aborts `signal`, which ends the wait; one that comes after the wait is answered with a drain once
 * the process serves (`stop()` gives it).
 */

/** The reason `signal` is aborted with: the process was told to stop before it served. */
export class StoppedWhileStarting extends Error {
  constructor(readonly received: NodeJS.Signals) {
    super(`${received} received while starting`);
    this.name = 'StoppedWhileStarting';
  }
}

export interface StartSignals {
  /** Aborted with a `StoppedWhileStarting` at the first SIGTERM or SIGINT. */
  readonly signal: AbortSignal;
  /** Removes the listeners; gives the signal received meanwhile, if any. */
  stop(): NodeJS.Signals | null;
}

/** Listens for SIGTERM and SIGINT until `stop()`. */
export function watchStartSignals(): StartSignals {
  const controller = new AbortController();
  let received: NodeJS.Signals | null = null;
  const on = (sig: NodeJS.Signals) => {
    received ??= sig;
    controller.abort(new StoppedWhileStarting(sig));
  };
  const signals: NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];
  for (const sig of signals) process.on(sig, on);
  return {
    signal: controller.signal,
    stop: () => {
      for (const sig of signals) process.off(sig, on);
      return received;
    },
  };
}
