/**
 * SIGTERM and SIGINT while a process is still starting. A process manager that stops a process which has not
 * served yet expects the exit 0 of a drain, promptly, not a kill after its grace period; and a start can wait
 * long: for a NATS server not reachable yet (actors/transport/nats-connect.ts), for a MongoDB server that does
 * not answer (the driver waits out its server selection timeout). `main.ts` listens from its first line until the drain's
 * own listeners replace these: a signal aborts `signal`, which ends the wait for NATS and the steps awaited
 * through `until`, and the start closes what it opened and exits 0; one that comes once the runtime has started
 * is answered with a drain once the process serves (`stop()` gives it).
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
  /**
   * `step`, unless the process is told to stop first (or was already): then rejects with `signal`'s reason at
   * once, and what `step` settles with later is dropped. For steps that hold nothing to close until they
   * resolve (opening a store waits on its server).
   */
  until<T>(step: Promise<T>): Promise<T>;
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
  const signal = controller.signal;
  return {
    signal,
    until: (step) => {
      if (signal.aborted) {
        step.catch(() => {});
        return Promise.reject(signal.reason);
      }
      return new Promise((resolve, reject) => {
        const onAbort = () => {
          // A failure after the stop (the server answers at last) is no one's to report.
          step.catch(() => {});
          reject(signal.reason);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        step.then(
          (value) => {
            signal.removeEventListener('abort', onAbort);
            resolve(value);
          },
          (err: unknown) => {
            signal.removeEventListener('abort', onAbort);
            reject(err);
          },
        );
      });
    },
    stop: () => {
      for (const sig of signals) process.off(sig, on);
      return received;
    },
  };
}
