/**
 * Recordings whose media gateway died before completing them, and whose conversation then ended otherwise than
 * idle (the recordings projector completes those that end idle): an agent that ended the call with
 * `conv.end()` while its goodbye was still being spoken, the gateway gone before the last chunk. Nothing would
 * ever complete them, so the redacted audio would be rendered on every request and never kept.
 *
 * A live gateway completes its recording seconds after its conversation ends (the goodbye, the last chunk), so
 * one still incomplete `ORPHANED_AFTER_MS` after that end is taken as orphaned: its meta's `ended_at` becomes
 * the conversation's end, and `recording.completed` is journaled, on which the recordings projector renders it,
 * exactly as for a recording its gateway completed.
 */
import type { JournalStore } from '../../store/mod.js';
import type { BlobStore } from '../../store/blobs/mod.js';
import { isComplete, recordingCompletedEntry, recordingPrefix, type RecordingMeta } from './layout.js';
import { conversationEnd } from './projector.js';

/** How long after its conversation's end an incomplete recording is left to the gateway that may be writing it. */
export const ORPHANED_AFTER_MS = 10 * 60_000;

/**
 * Completes the recording of `meta` if it is still incomplete `ORPHANED_AFTER_MS` after its conversation ended;
 * whether it did. Called by every media gateway's sweep for each recording it reads: gateways that meet on one
 * orphan write the same `ended_at`, and the projector renders a recording once whatever the number of
 * `recording.completed` entries.
 */
export async function completeIfOrphaned(blobs: BlobStore, journal: Pick<JournalStore, 'append' | 'ofActor'>, meta: RecordingMeta, now = Date.now()): Promise<boolean> {
  // A recording younger than that cannot have a conversation that ended that long ago: no journal read.
  if (isComplete(meta) || now - meta.started_at < ORPHANED_AFTER_MS) return false;
  const [last] = await journal.ofActor(`conversation/${meta.conversation_id}`, { last: 1 });
  const endedAt = last ? conversationEnd(last)?.at : undefined;
  if (endedAt === undefined || now - endedAt < ORPHANED_AFTER_MS) return false;
  const prefix = recordingPrefix(meta.account_id, meta.project_id, meta.conversation_id);
  await blobs.put(`${prefix}/meta`, Buffer.from(JSON.stringify(Object.assign({}, meta, { ended_at: endedAt }) satisfies RecordingMeta)));
  await journal.append(recordingCompletedEntry({ conversation_id: meta.conversation_id, account_id: meta.account_id, project_id: meta.project_id, call_sid: meta.call_sid, ended_at: endedAt }));
  return true;
}
