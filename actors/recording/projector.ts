import type { JournalEntry, Store } from '../../store/mod.js';
import { openBlobStore, type BlobStore } from '../../store/blobs/mod.js';
import type { Projector } from '../projection/types.js';
import { conversationRecords } from '../conversation/mod.js';
import { isComplete, RECORDING_COMPLETED, RECORDING_KIND, RECORDING_STARTED, recordingPrefix, type RecordingMeta, type RecordingStarted, type Redaction } from './layout.js';
import { catalogRendered, catalogStarted, clearCatalog } from './catalog.js';
import { renderRedacted } from './redact.js';
import { markedValues } from './marks.js';

const isEnd = (e: JournalEntry) => e.value === 'ended' || e.events.some((x) => x.type === 'conversation.ended');
/** The end an entry journals for its conversation (`conversation.ended`): when (epoch ms), and why. */
export function conversationEnd(e: JournalEntry): { at: number; reason: string } | null {
  const ended = e.events.find((x) => x.type === 'conversation.ended');
  const at = ended ? Date.parse(String(ended.data.ended_at)) : Number.NaN;
  return Number.isFinite(at) ? { at, reason: String(ended!.data.reason) } : null;
}
/** When an entry ends its conversation for being idle (no turn, no audio event for `CONVERSATION_IDLE_MS`), the end's time. */
const idleEnd = (e: JournalEntry): number | null => {
  const end = conversationEnd(e);
  return end?.reason === 'idle' ? end.at : null;
};
const completesRecording = (e: JournalEntry) => e.kind === RECORDING_KIND && e.events.some((x) => x.type === RECORDING_COMPLETED);

/**
 * `recordings`: renders each call's redacted audio once (both tracks muted over the spans, and the spans
 * listed), from the conversation's turns and the recording's digit times, once both facts hold: the
 * conversation has ended, and the recording is complete (the media gateway journals `recording.completed`
 * after the meta's `ended_at`, itself written after the last chunks). Either can come first: a call the
 * agent ends with `conv.end()` ends its conversation before the goodbye is spoken and the call hung up; one
 * the caller hangs up completes its recording first. So each of the two entries checks the other fact, and
 * the second one renders: a conversation's end finds the meta's `ended_at` (written before the completion
 * entry is appended), a completion finds the conversation's end in its journal (appended before). The two
 * kinds may sit in different partitions; both checks read what was written before the entry that triggers
 * them, so whichever is applied last sees both. Idempotent: an entry seen again finds the rendering done.
 *
 * A media gateway that died mid-call never completes its recording. Its conversation, with no media feeding it
 * any more, ends idle: a live call never does (its caller's speech, silence and digits are all turns). So a
 * recording still incomplete when its conversation ends idle is completed here, as what was written up to the
 * crash (the meta's `ended_at`: the conversation's end), and rendered.
 * It opens the deployment's blob store from the environment (DATA_DIR or MONGODB_URL, as the process that
 * runs it is configured), since a projector is handed the record store only.
 */
export function recordingsProjector(blobsOf: () => Promise<BlobStore> = defaultBlobs): Projector {
  return {
    name: 'recordings',
    kinds: ['conversation', RECORDING_KIND],
    async apply(entries: JournalEntry[], store: Store): Promise<void> {
      const ended = new Set(entries.filter((e) => e.kind === 'conversation' && isEnd(e)).map((e) => e.id));
      const idled = new Map<string, number>();
      for (const e of entries) {
        const at = e.kind === 'conversation' ? idleEnd(e) : null;
        if (at !== null) idled.set(e.id, at);
      }
      // The batch's starts written together: one group commit, not one each.
      const started = entries.flatMap((e) => (e.kind === RECORDING_KIND ? e.events.filter((x) => x.type === RECORDING_STARTED) : []));
      await Promise.all(started.map((x) => catalogStarted(store, x.data as unknown as RecordingStarted)));
      const completed = new Set(entries.filter(completesRecording).map((e) => e.id));
      if (ended.size === 0 && completed.size === 0) return;
      const blobs = await blobsOf();
      const records = conversationRecords(store);
      for (const id of new Set([...ended, ...completed])) {
        // A completed recording whose conversation has not ended yet: its end will render it.
        if (!ended.has(id) && !(await store.journal.ofActor(`conversation/${id}`)).some(isEnd)) continue;
        // The record is written just after the snapshot whose entry ended it: wait for it to say so.
        let r = await records.get(id);
        for (let i = 0; i < 50 && r && r.in_progress; i++) {
          await new Promise((res) => setTimeout(res, 100));
          r = await records.get(id);
        }
        if (!r || r.channel !== 'VOICE-SIP' || r.in_progress) continue;
        const prefix = recordingPrefix(r.account_id, r.project_id, r.id);
        const raw = await blobs.read(`${prefix}/meta`);
        if (!raw) continue;
        const meta = JSON.parse(raw.toString()) as RecordingMeta;
        if (!isComplete(meta)) {
          const orphanedAt = idled.get(id);
          // Still being written: its `recording.completed` will render it.
          if (orphanedAt === undefined) continue;
          await blobs.put(`${prefix}/meta`, Buffer.from(JSON.stringify({ ...meta, ended_at: orphanedAt } satisfies RecordingMeta)));
        }
        // Rendered already (an entry seen again, or the audio endpoint asked first): catalogued as it is.
        const rendered = await blobs.read(`${prefix}/redactions`);
        const spans = rendered ? (JSON.parse(rendered.toString()) as Redaction[]) : await renderRedacted(blobs, prefix, r.turns, await markedValues(store, id));
        await catalogRendered(store, meta, spans);
      }
    },
    async reset(store: Store): Promise<void> {
      await clearCatalog(store);
      const blobs = await blobsOf();
      for (const name of await blobs.list('rec')) {
        if (/\/(redacted-caller|redacted-agent|redactions)$/.test(name)) await blobs.remove(name);
      }
    },
  };
}

let shared: Promise<BlobStore> | null = null;
function defaultBlobs(): Promise<BlobStore> {
  shared ??= openBlobStore({ dataDir: process.env.DATA_DIR || './data', mongodbUrl: process.env.MONGODB_URL || undefined });
  return shared;
}
