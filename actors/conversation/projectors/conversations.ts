/**
 * The `conversations` projector: the conversation read models, built from the conversation actors' journal
 * entries off the reply path (the projection runner calls `apply` with entries in seq order):
 *
 * - the record (`record.ts`), folded from the entries (`record-fold.ts`) and written whole, unless the
 *   stored one is of this entry's version or newer;
 * - once the conversation has ended, its rendered document (`document.ts`), before the record, so that no
 *   reader sees an ended record without its document;
 * - the search records (`search.ts`: postings, the summary with its vector, hour counts, the span and vector
 *   slots), from the folded record, in the same batch as the record;
 * - first of all, the values functions marked personal (`marks.ts`), which mask the turns for keys without
 *   `pii`: written and awaited before anything else of the batch, so no turn (record, document, posting) is
 *   readable before the marks of its own step. This projector owns them for that: projected separately, they
 *   came later than the turns, which were shown raw meanwhile.
 *
 * A batch reads each conversation's record once, folds all its entries, and writes it once. Every write is
 * idempotent (versioned records and documents, postings and slot entries keyed by conversation), so a batch
 * applied again after a crash changes nothing; a conversation whose stored record already holds the batch's
 * entries has its search records derived again from that record, as they may not all have been written (a
 * batch whose indexing failed, a crash between two commits). `switchboard rebuild conversations` resets and replays it (the
 * marks excepted: see `reset`).
 */

import { conversationDocuments, documentOf } from '../document.js';
import { addMarks, marksIn } from '../marks.js';
import { createEmbedderFromEnv, type Embedder } from '../embedding.js';
import { conversationRecords, type ConversationRecord } from '../record.js';
import { conversationHours, conversationSpans, conversationTerms, conversationVectorBuckets, conversationVectors, searchIndexer, type RecordFields, type SearchIndexer } from '../search.js';
import type { JournalEntry, Store } from '../../../store/mod.js';
import { LiveCache } from '../../projection/live-cache.js';
import type { Projector } from '../../projection/types.js';
import { foldRecord } from './record-fold.js';

/** The events the record is folded from; a step that emitted none of them writes nothing. */
const RECORD_EVENTS = new Set(['conversation.started', 'conversation.turn', 'conversation.changed', 'conversation.ended']);

/**
 * Live conversations whose folded record the projector keeps in memory (`LiveCache`: beyond it, a
 * conversation's record is read back at its next turn), and how long an entry must have been idle before a
 * new one may take its place.
 */
const LIVE_RECORDS = 16_384;
const LIVE_IDLE_MS = 60_000;

export interface ConversationsProjectorOptions {
  /** Embeds ended conversations for semantic search (default: from the environment, as the edge's queries). */
  embedder?: Embedder;
  log?: (msg: string, err: unknown) => void;
}

export function conversationsProjector(opts: ConversationsProjectorOptions = {}): Projector {
  const embedder = opts.embedder ?? createEmbedderFromEnv();
  // One indexer per store: it caches live conversations' analysed terms.
  const indexers = new WeakMap<Store, SearchIndexer>();
  const indexer = (store: Store) => {
    let i = indexers.get(store);
    if (!i) indexers.set(store, (i = searchIndexer(store, embedder, opts.log)));
    return i;
  };

  /**
   * The records of live conversations as this projector last wrote them, so that the next entry of one is
   * folded without reading and decoding its record (transcript and all) again. Used only for the entry that
   * directly follows (version + 1): anything else (an entry seen again after a crash, a rebuild's replay from
   * version 1, entries another runner applied meanwhile, a step that recorded nothing) reads the store.
   */
  const live = new LiveCache<ConversationRecord>(LIVE_RECORDS, LIVE_IDLE_MS);
  const remember = (r: ConversationRecord) => {
    if (r.in_progress) live.set(r.id, r);
    else live.delete(r.id);
  };

  return {
    name: 'conversations',
    kinds: ['conversation'],
    async apply(entries: JournalEntry[], store: Store): Promise<void> {
      // The marks before the turns they mask (a step's marks and its turn are in one entry): each
      // conversation's values in seq order, one idempotent write each, all durable before the rest is written.
      const marks = new Map<string, string[]>();
      for (const e of entries) {
        const values = e.kind === 'conversation' ? marksIn(e) : [];
        if (values.length > 0) marks.set(e.id, [...(marks.get(e.id) ?? []), ...values]);
      }
      if (marks.size > 0) await Promise.all([...marks].map(([id, values]) => addMarks(store, id, values)));
      const byId = new Map<string, JournalEntry[]>();
      for (const e of entries) {
        if (e.kind !== 'conversation' || !e.events.some((ev) => RECORD_EVENTS.has(ev.type))) continue;
        const list = byId.get(e.id);
        if (list) list.push(e);
        else byId.set(e.id, [e]);
      }
      if (byId.size === 0) return;
      const records = conversationRecords(store);
      const documents = conversationDocuments(store);
      const search = indexer(store);
      const stored = new Map<string, ConversationRecord>();
      const unknown: string[] = [];
      for (const [id, list] of byId) {
        const cached = live.take(id);
        if (cached && cached.snapshot_version === list[0].version - 1) stored.set(id, cached);
        else unknown.push(id);
      }
      if (unknown.length > 0) for (const r of await records.find({ id: { $in: unknown } })) stored.set(r.id, r);
      await Promise.all([...byId].map(async ([id, list]) => {
        const before = stored.get(id) ?? null;
        const from = before?.snapshot_version ?? 0;
        let record: ConversationRecord | null = before;
        for (const e of list) record = foldRecord(record, id, e);
        if (!record) return;
        if ((record.snapshot_version ?? 0) <= from && before) {
          // The record holds these entries already, but that does not say their search records were written: a
          // batch whose indexing failed (an analysis that threw, a write that failed) had its record written
          // beside it, and a crash can come between the record's commit and the postings'. The runner applies
          // the batch again from this projector's checkpoint; it is derived again from the stored record here
          // (idempotent), or the retry skipped the turn's postings and summary for good.
          remember(before);
          await search.project(id, before as unknown as RecordFields, from);
          return;
        }
        // A record folded from nothing: whatever the indexer remembers of it predates a reset (a rebuild's reset
        // is made by the runner of partition 0, which may be another process's instance of this projector).
        if (!before) search.forget(id);
        const version = record.snapshot_version ?? 0;
        // Settled into a value at once: a rejection left unobserved while the writes below are awaited is an
        // unhandled rejection, which ends the projection thread (and with it every projector) instead of failing
        // this batch of this projector.
        const indexing = search.project(id, record as unknown as RecordFields, version).then(() => null, (err: unknown) => ({ err }));
        try {
          if (!record.in_progress) await documents.putNewer(documentOf(record), 'snapshot_version');
          // Refused: a newer record is stored (another runner got further); it is not remembered then.
          if (await records.putNewer(record, 'snapshot_version')) remember(record);
        } finally {
          const failed = await indexing;
          if (failed) throw failed.err;
        }
      }));
    },
    async reset(store: Store): Promise<void> {
      indexers.delete(store);
      live.clear();
      await Promise.all([
        conversationRecords(store).delete({}),
        conversationDocuments(store).delete({}),
        conversationVectors(store).delete({}),
        conversationTerms(store).delete({}),
        conversationHours(store).delete({}),
        conversationSpans(store).delete({}),
        conversationVectorBuckets(store).delete({}),
      ]);
      // The marks are kept. A batch another runner (another process, over NATS) read before the rebuild and
      // still applies while this runs (longer than the reset's grace, `ProjectionRunner`) may write its records
      // after they were dropped here: with the marks dropped too, those turns would read unmasked until the
      // replay wrote the marks again. Kept, they mask from the first turn the replay writes; the replay only adds to them
      // (`addMarks`: the same values, in the same order), and a value is only ever marked, never unmarked, so a
      // kept mark is never one the journal no longer holds.
    },
  };
}
