/**
 * A worker's periodic sweep of a collection (external waits and events, the webhook delivery log): a pass at
 * once, then every `everyMs`, one pass at a time; a failed pass is logged and the next one tries again.
 */

/** A worker's sweeps: started with the worker, stopped before its store closes. */
export interface Sweeps {
  /** Ends the sweeps; resolves once a pass in progress has stopped (at the end of its current step). */
  stop(): Promise<void>;
}

/**
 * Runs `pass` at once (a backlog left by a long stop goes first) and then every `everyMs`; `pass` is told to stop
 * through its argument, which it reads between its steps. `failed`: the log line of a pass that threw.
 */
export function startSweeps(
  pass: (stopped: () => boolean) => Promise<unknown>,
  everyMs: number,
  log: (msg: string, extra: Record<string, unknown>) => void,
  failed: string,
): Sweeps {
  let stopped = false;
  let running: Promise<void> | null = null;
  const run = () => {
    if (running || stopped) return;
    running = pass(() => stopped)
      .then(
        () => undefined,
        (err: unknown) => log(failed, { err: String(err) }),
      )
      .finally(() => (running = null));
  };
  run();
  const timer = setInterval(run, everyMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
