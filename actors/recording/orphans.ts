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
import type { JournalEntry, JournalStore } from '../../store/mod.js';
import type { BlobStore } from '../../store/blobs/mod.js';
import { isComplete, recordingCompletedEntry, type RecordingMeta } from './layout.js';

/** How long after its conversation's end an incomplete recording is left to the gateway that may be writing it. */
export const ORPHANED_AFTER_MS = 10 * 60_000;

/** When the entry ended its conversation (epoch ms), or null. */
function endOf(e: JournalEntry): number | null {
  const ended = e.events.find((x) => x.type === 'conversation.ended');
  const at = ended ? Date.parse(String(ended.data.ended_at)) : Number.NaN;
  return Number.isFinite(at) ? at : null;
}

/**
 * Completes every recording still incomplete `ORPHANED_AFTER_MS` after its conversation ended; returns the
 * conversation ids it completed. Safe to run on several gateways at once: each writes the same `ended_at`, and
 * the projector's rendering of a recording is done once whatever the number of `recording.completed` entries.
 */
export async function completeOrphaned(blobs: BlobStore, journal: Pick<JournalStore, 'append' | 'ofActor'>, now = Date.now()): Promise<string[]> {
  const completed: string[] = [];
  for (const name of await blobs.list('rec')) {
    if (!name.endsWith('/meta')) continue;
    const raw = await blobs.read(name);
    const meta = raw ? (JSON.parse(raw.toString()) as RecordingMeta) : null;
    if (!meta || isComplete(meta) || meta.expires_at <= now || now - meta.started_at < ORPHANED_AFTER_MS) continue;
    const [last] = await journal.ofActor(`conversation/${meta.conversation_id}`, { last: 1 });
    const endedAt = last ? endOf(last) : null;
    if (endedAt === null || now - endedAt < ORPHANED_AFTER_MS) continue;
    await blobs.put(name, Buffer.from(JSON.stringify(Object.assign({}, meta, { ended_at: endedAt }) satisfies RecordingMeta)));
    await journal.append(recordingCompletedEntry({ conversation_id: meta.conversation_id, account_id: meta.account_id, project_id: meta.project_id, call_sid: meta.call_sid, ended_at: endedAt }));
    completed.push(meta.conversation_id);
  }
  return completed;
}
