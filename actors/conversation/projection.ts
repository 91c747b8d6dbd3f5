/**
 * The conversation projection: what the conversation actor writes after each durable snapshot, and the
 * only code that writes a conversation's read models (the benchmark seeds through it too):
 *
 * - the search records (`search.ts`: postings, summary, slots), in the same group commit as the record;
 * - once the conversation has ended, its rendered document (`document.ts`), before the record, so that no
 *   reader sees an ended record without its document;
 * - the record itself, whole, unless the stored one is of this snapshot version or newer.
 */
import type { Store } from '../../store/mod.js';
import { conversationDocuments, documentOf } from './document.js';
import type { Embedder } from './embedding.js';
import { conversationRecords, type ConversationRecord } from './record.js';
import { searchIndexer, type RecordFields } from './search.js';

export type ConversationProjection = (record: ConversationRecord, version: number) => Promise<void>;

export function conversationProjection(store: Store, embedder: Embedder, log: (msg: string, err: unknown) => void = () => undefined): ConversationProjection {
  const records = conversationRecords(store);
  const documents = conversationDocuments(store);
  const search = searchIndexer(store, embedder, log);
  return async (record, version) => {
    const indexing = search.project(record.id, record as unknown as RecordFields, version);
    try {
      if (!record.in_progress) await documents.putNewer(documentOf(record), 'snapshot_version');
      await records.putNewer(record, 'snapshot_version');
    } finally {
      await indexing;
    }
  };
}
