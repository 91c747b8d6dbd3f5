/**
 * The read model of recordings by conversation (`recording_catalog`): what a conversation row says of its audio
 * (v3 `audio`), read with the row instead of looking the recording up in the blob store (a read per call row, one
 * row after the other, most of them failing for a call without one; with MongoDB a GridFS round trip each:
 * bench/README.md, thirty-seventh session). Written only by the `recordings` projector (`projector.ts`): from
 * `recording.started`, which the media gateway journals once a call's recording has its meta, and from each
 * redacted rendering's spans. Rebuilt from the journal with the renderings (`switchboard rebuild recordings`).
 */
import type { Store } from '../../store/mod.js';
import type { RecordingMeta, Redaction } from './layout.js';

interface CatalogRecord {
  /** The conversation. */
  id: string;
  account_id: string;
  project_id: string;
  /** Epoch ms after which the recording is deleted: not available from then on. */
  expires_at: number;
  /** The redacted rendering's spans, once it is rendered. */
  redactions?: Redaction[];
  [k: string]: unknown;
}

/** What a conversation row says of its audio (Conversations API v3 `audio`). */
export interface AudioInfo {
  /** Whether the call has a recording the audio endpoint serves. */
  available: boolean;
  /**
   * The muted spans of the redacted rendering (offsets in ms and kind, never the value); absent until it is
   * rendered, never null: a v3 row has no nulls (contract 2.5).
   */
  redactions?: Redaction[];
}

export const recordingCatalog = (store: Store) => store.collection<CatalogRecord>({ name: 'recording_catalog', readModel: true });

/**
 * The audio of conversations as their rows show it, from the catalog: one query for all of them (a page's
 * call rows are read together, not one round trip each), scoped to the project.
 */
export async function audioOf(store: Store, projectId: string, conversationIds: string[], now = Date.now()): Promise<Map<string, AudioInfo>> {
  const out = new Map<string, AudioInfo>();
  if (conversationIds.length === 0) return out;
  for (const r of await recordingCatalog(store).find({ id: { $in: conversationIds } })) {
    if (r.project_id !== projectId || r.expires_at <= now) continue;
    out.set(r.id, Array.isArray(r.redactions) ? { available: true, redactions: r.redactions } : { available: true });
  }
  return out;
}

/** A recording the media gateway started: catalogued (again: idempotent). */
export async function catalogStarted(store: Store, r: { conversation_id: string; account_id: string; project_id: string; expires_at: number }): Promise<void> {
  await recordingCatalog(store).update(
    { id: r.conversation_id },
    { $set: { account_id: r.account_id, project_id: r.project_id, expires_at: r.expires_at } },
    { upsert: true },
  );
}

/** A recording's redacted rendering: its spans catalogued with it (and the recording, were its start not). */
export async function catalogRendered(store: Store, meta: Pick<RecordingMeta, 'conversation_id' | 'account_id' | 'project_id' | 'expires_at'>, redactions: Redaction[]): Promise<void> {
  await recordingCatalog(store).update(
    { id: meta.conversation_id },
    { $set: { account_id: meta.account_id, project_id: meta.project_id, expires_at: meta.expires_at, redactions } },
    { upsert: true },
  );
}

/** Drops the catalog (a rebuild replays it from the journal). */
export async function clearCatalog(store: Store): Promise<void> {
  await recordingCatalog(store).delete({});
}
