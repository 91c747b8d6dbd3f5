/**
 * The time an actor's snapshot is indexed under for the scheduler's wake-ups (`SnapshotPut.deadline`).
 *
 * The index only has to wake an actor no later than its earliest deadline; waking it earlier costs a load and
 * nothing else. So a step that moves the deadline later (every turn of a conversation, every message of a
 * messaging session pushes its idle deadline on) keeps the entry it has, and the store writes the snapshot and
 * its journal entry only. Without this, every such step removed and re-inserted the actor's entry in the deadline index.
 * An entry that comes due before the actor's real deadline is moved to it by the wake-up it causes
 * (`Activation`), and by any step taken within `WAKE_INDEX_REFRESH_MS` of it, which an active actor usually
 * takes first.
 */

/**
 * How close to an indexed time a step moves the entry to the real deadline, so that active actors are seldom
 * woken early (the default of `HostOptions.wakeIndexRefreshMs`).
 */
export const WAKE_INDEX_REFRESH_MS = 60_000;

/**
 * How many due entries one scan of the scheduler takes, the earliest first (the default of
 * `HostOptions.wakeScanLimit`). An entry found stays due only while its actor's own deadline is due (its timer
 * fires it), so the entries behind these are reached at the next scans.
 */
export const WAKE_SCAN_LIMIT = 1000;

/**
 * The time to index a snapshot under: null when it has no deadline, else the entry it has (`indexed`) when
 * that is still at or before `due` and more than `refreshMs` after `now`, else `due` itself.
 */
export function wakeIndexTime(indexed: number | null, due: number | null, now: number, refreshMs = WAKE_INDEX_REFRESH_MS): number | null {
  if (due === null) return null;
  if (indexed !== null && indexed <= due && indexed > now + refreshMs) return indexed;
  return due;
}
