import type { Collection, Filter } from '../store/mod.js';

/**
 * A worker's periodic sweep of a collection (external waits and events, the webhook delivery log): a pass at
 * once, then every `everyMs`, one pass at a time; a failed pass is logged and the next one tries again. A pass
 * reads the collection in `SWEEP_SLICES` slices of its id space (`idSlice`: ids are a prefix and hex, spread
 * evenly), one slice a step, so that each step reads a 256th of it whatever the backlog and the event loop runs
 * between steps; it deletes what it found in writes of at most `SWEEP_DELETE_BATCH` records (`deleteInBatches`).
 */

/** The slices a pass reads a collection's ids in. */
export const SWEEP_SLICES = 256;
/** The most records one delete removes (one write transaction each). */
export const SWEEP_DELETE_BATCH = 256;

/** The id range of slice `i` of ids `<prefix>` and hex: `<prefix>00…` to `<prefix>ff…` by their first two digits. */
export function idSlice(prefix: string, i: number): { $gte: string; $lt: string } {
  const hex = (n: number) => n.toString(16).padStart(2, '0');
  return { $gte: `${prefix}${hex(i)}`, $lt: i + 1 < SWEEP_SLICES ? `${prefix}${hex(i + 1)}` : `${prefix}g` };
}

/**
 * Deletes the records of `ids` that still match `also` (what the pass read of them: a record changed meanwhile
 * stays), `SWEEP_DELETE_BATCH` a write. Returns how many.
 */
export async function deleteInBatches(collection: Pick<Collection, 'delete'>, ids: string[], also: Filter): Promise<number> {
  let removed = 0;
  for (let at = 0; at < ids.length; at += SWEEP_DELETE_BATCH) removed += await collection.delete({ id: { $in: ids.slice(at, at + SWEEP_DELETE_BATCH) }, ...also });
  return removed;
}

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
