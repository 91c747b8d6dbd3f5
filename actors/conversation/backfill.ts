/**
 * The one-off back-fill of the conversation read models, for stores written before them: every ended
 * record gets its document (`document.ts`), and every record without a search summary is projected into
 * the search records and slots (`search.ts`), so that list pages, transcript, semantic and random modes and
 * concurrency all see conversations recorded by earlier versions. Run by the edge when it starts, in the
 * background; readers use records for pages until it is done (`readModelsComplete`).
 *
 * Records are read in 258 ranges of ids (before `00`, `00` to `01`, ..., from `ff` on): primary-key ranges
 * on both backends, so no read holds more than a slice of the store. Idempotent, and safe beside the
 * projection: documents and summaries are only written over older versions, postings and slot entries once.
 */
import type { Collection, Doc, Store } from '../../store/mod.js';
import { conversationDocuments, documentOf } from './document.js';
import type { Embedder } from './embedding.js';
import { conversationRecords } from './record.js';
import { conversationVectors, searchIndexer, type RecordFields } from './search.js';

export interface Migration extends Doc {
  done_at: string;
}

/** One-off data migrations that are done (by id). */
export const migrations = (store: Store): Collection<Migration> => store.collection<Migration>({ name: 'store_migrations' });

const READ_MODELS = 'conversation_read_models';

/** Whether the back-fill is done (in this process or another). */
export async function readModelsComplete(store: Store): Promise<boolean> {
  return (await migrations(store).get(READ_MODELS)) !== null;
}

/** What a back-fill wrote. */
export interface Backfilled {
  documents: number;
  indexed: number;
}

export async function backfillReadModels(store: Store, embedder: Embedder): Promise<Backfilled> {
  const done: Backfilled = { documents: 0, indexed: 0 };
  if (await readModelsComplete(store)) return done;
  const records = conversationRecords(store);
  const documents = conversationDocuments(store);
  const summaries = conversationVectors(store);
  const search = searchIndexer(store, embedder);
  const bounds = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
  for (let i = 0; i <= bounds.length; i++) {
    // The embedded store answers without leaving the event loop: give requests their turn between ranges.
    await new Promise((resolve) => setImmediate(resolve));
    const id = { ...(i > 0 ? { $gte: bounds[i - 1] } : {}), ...(i < bounds.length ? { $lt: bounds[i] } : {}) };
    const rows = await records.find({ id });
    if (rows.length === 0) continue;
    const ids = { id: { $in: rows.map((r) => r.id) } };
    const indexed = new Set((await summaries.find(ids)).map((s) => s.id));
    const documented = new Map((await documents.find(ids)).map((d) => [d.id, d.snapshot_version]));
    await Promise.all(rows.map(async (r) => {
      // Rendered only when no document of this version or a newer one is stored.
      const stored = documented.get(r.id);
      const current = stored !== undefined && stored >= (r.snapshot_version ?? 0);
      if (!r.in_progress && !current && (await documents.putNewer(documentOf(r), 'snapshot_version'))) done.documents++;
      if (!indexed.has(r.id)) {
        await search.project(r.id, r as unknown as RecordFields, r.snapshot_version ?? 0);
        done.indexed++;
      }
    }));
  }
  await migrations(store).update({ id: READ_MODELS }, { $set: { done_at: new Date().toISOString() } }, { upsert: true });
  return done;
}
