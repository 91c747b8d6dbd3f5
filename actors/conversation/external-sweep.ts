import type { Store } from '../../store/mod.js';
import { externalEventRecords, externalWaitRecords } from './external.js';
import { deleteInBatches, idSlice, startSweeps, SWEEP_SLICES, type Sweeps } from '../sweeps.js';

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
/**
 * One pass over `external_waits` and `external_events`: deletes the events received more than `retentionMs`
 * before `now`, and each wait whose deadline is more than `graceMs` before `now`, slice
 * by slice (ids are `xev_` and a hash in hex: `idSlice`), in deletes of at most `SWEEP_DELETE_BATCH` records. A delete names the deadline it read,
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
  for (let i = 0; i < SWEEP_SLICES && !stopped(); i++) {
    const stale = await waits.find({ id: idSlice('xev_', i), deadline: { $lt: before } });
    removed += await deleteInBatches(waits, stale.map((w) => w.id), { deadline: { $lt: before } });
    // Events: the delete names the receipt time it read (a repeat that came meanwhile was stored afresh).
    const old = await events.find({ id: idSlice('xev_', i), received_at: { $lt: receivedBefore } });
    removed += await deleteInBatches(events, old.map((e) => e.id), { received_at: { $lt: receivedBefore } });
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
