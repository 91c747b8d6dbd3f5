import type { Store } from '../../store/mod.js';
import { externalEventRecords, externalWaitRecords } from './external.js';
import { startSweeps, type Sweeps } from '../sweeps.js';

/**
 * The sweep of `external_waits`: the waits nothing settled. A wait's record is deleted when the event or the
 * deadline settles it (`deleteExternalWait`, `settleExternalWait`); one left behind (the conversation was closed
 * while it waited, a turn replaced its wait with one for another id, a delete failed) is deleted here once its
 * deadline passed long ago.
 *
 * "Long ago" (`EXTERNAL_WAIT_GRACE_MS` past the deadline) leaves a conversation whose timer has not fired yet
 * (its worker was down at the deadline, and fires it once back) its wait while it may still take the event:
 * until then the webhook still hands the event to it.
 *
 * The same pass deletes the stored events (`external_events`) received more than the retention ago
 * (`EXTERNAL_EVENT_RETENTION_MS`, default 7 days, the longest wait a function may ask for), taken by a
 * conversation or not: each kept its body and parsed data for good, and a client sending new ids grew the data
 * directory without bound. Nothing reads an event once its conversation took it (the conversation keeps it in
 * its own state), but the record answers a repeat of its id as a duplicate (to the conversation that took it
 * only): that window is the retention. An event nobody took stays deliverable to a wait that starts within it.
 */

/** How long after its deadline a wait no conversation settled is kept. */
export const EXTERNAL_WAIT_GRACE_MS = 24 * 3_600_000;
/** How long a stored external event is kept, from its receipt (`EXTERNAL_EVENT_RETENTION_MS`). */
export const EXTERNAL_EVENT_RETENTION_MS = 7 * 86_400_000;
/** How often a worker sweeps (once at start, then at this interval). */
export const EXTERNAL_WAIT_SWEEP_EVERY_MS = 3_600_000;
/** The most records one delete removes (one write transaction each). */
const DELETE_BATCH = 256;
/**
 * A pass reads the waits in 256 slices of their id space (ids are `xev_` and a hash in hex, spread evenly), one
 * slice a step: each step reads a 256th of the collection by its id range, whatever the backlog, and the
 * event loop runs between steps.
 */
const SLICES = 256;

/** The id range of slice `i`: the ids `xev_00…` to `xev_ff…` by their first two hex digits. */
function slice(i: number): { $gte: string; $lt: string } {
  const hex = (n: number) => n.toString(16).padStart(2, '0');
  return { $gte: `xev_${hex(i)}`, $lt: i + 1 < SLICES ? `xev_${hex(i + 1)}` : 'xev_g' };
}

/**
 * One pass over `external_waits` and `external_events`: deletes the events received more than `retentionMs`
 * before `now`, and each wait whose deadline is more than `graceMs` before `now`, slice
 * by slice (see `SLICES`), in deletes of at most `DELETE_BATCH` records. A delete names the deadline it read,
 * so a wait registered again meanwhile (a new deadline) stays. Returns how many it deleted.
 */
export async function sweepExternalWaits(
  store: Store,
  now = Date.now(),
  graceMs = EXTERNAL_WAIT_GRACE_MS,
  stopped = () => false,
  retentionMs = EXTERNAL_EVENT_RETENTION_MS,
): Promise<number> {
  const waits = externalWaitRecords(store);
  const events = externalEventRecords(store);
  const before = new Date(now - graceMs).toISOString();
  const receivedBefore = new Date(now - retentionMs).toISOString();
  let removed = 0;
  for (let i = 0; i < SLICES && !stopped(); i++) {
    const stale = await waits.find({ id: slice(i), deadline: { $lt: before } });
    for (let at = 0; at < stale.length; at += DELETE_BATCH) {
      const ids = stale.slice(at, at + DELETE_BATCH).map((w) => w.id);
      removed += await waits.delete({ id: { $in: ids }, deadline: { $lt: before } });
    }
    // Events: the delete names the receipt time it read (a repeat that came meanwhile was stored afresh).
    const old = await events.find({ id: slice(i), received_at: { $lt: receivedBefore } });
    for (let at = 0; at < old.length; at += DELETE_BATCH) {
      const ids = old.slice(at, at + DELETE_BATCH).map((e) => e.id);
      removed += await events.delete({ id: { $in: ids }, received_at: { $lt: receivedBefore } });
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  return removed;
}

/**
 * Sweeps `external_waits` and `external_events` at once (a backlog left by an older version, or by a long stop, goes
 * first) and then every `everyMs` (`startSweeps`).
 */
export function startExternalWaitSweeps(
  store: Store,
  log: (msg: string, extra: Record<string, unknown>) => void,
  everyMs = EXTERNAL_WAIT_SWEEP_EVERY_MS,
  retentionMs = EXTERNAL_EVENT_RETENTION_MS,
): Sweeps {
  return startSweeps((stopped) => sweepExternalWaits(store, Date.now(), EXTERNAL_WAIT_GRACE_MS, stopped, retentionMs), everyMs, log, 'external wait sweep failed');
}
