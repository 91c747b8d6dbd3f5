/**
 * Conversation documents: an ended conversation's v3 representation, rendered once by the projector and
 * stored as UTF-8 JSON beside the record (`conversation_documents`), with the fields the Conversations API
 * filters on and the same time-ordered indexes as the records.
 *
 * A 1,000-row page of ended conversations then costs reading 1,000 byte strings and concatenating them:
 * no msgpack decoding of 1,000 records of turns, no rendering, no `JSON.stringify` of megabytes, and none
 * of the garbage those leave. The document holds the transcript; `turns_at`/`turns_end` are the byte offsets of the turns
 * array, so a project with transcripts hidden gets `[]` spliced in without parsing; `personal` says whether the
 * rules of personal data mask any of it, so a key without `pii` reads one that holds none as stored too. Documents are written
 * only for ended conversations (a conversation in progress changes at every turn, and rendering it whole
 * at every turn would cost its length each time): readers merge them with the in-progress records.
 *
 * Written, and durable, before the record: a reader may see a document while the record still says the
 * conversation is in progress (readers then show the document), never an ended record without its document.
 * Written by the conversations projector (`projectors/conversations.ts`); a changed rendering is rebuilt from
 * the journal (`switchboard rebuild conversations`). Readers take a document's bytes through `documentJson`.
 */
import type { Collection, Doc, Store } from '../../store/mod.js';
import type { ConversationRecord } from './record.js';
import { holdsPersonalData } from './personal.js';
import { conversationV3 } from './view.js';

export interface ConversationDocument extends Doc {
  project_id: string;
  environment: string;
  started_at: string;
  channel: string;
  variant_id: string;
  variant_name: string;
  /** Always false: documents are of ended conversations. */
  in_progress: false;
  snapshot_version: number;
  /** The v3 representation with turns and without latency, UTF-8 JSON. */
  json: Uint8Array;
  /** Byte offsets of the `turns` array's value in `json` (start inclusive, end exclusive). */
  turns_at: number;
  turns_end: number;
  /**
   * Whether a turn, a variable (its name too) or a handoff text holds personal data by the built-in rules (`personal.ts`, marks aside): a key
   * without `pii` reads a document without it, and without marked values, as stored, unparsed.
   */
  personal: boolean;
}

export const conversationDocuments = (store: Store): Collection<ConversationDocument> =>
  store.collection<ConversationDocument>({
    name: 'conversation_documents',
    indexes: [
      { fields: ['project_id', 'environment', 'started_at'] },
      { fields: ['project_id', 'environment', 'channel', 'started_at'] },
      { fields: ['project_id', 'environment', 'variant_id', 'started_at'] },
    ],
    readModel: true,
  });

/** The document of an ended conversation's record. */
export function documentOf(record: ConversationRecord): ConversationDocument {
  const { turns: turnList, ...fields } = conversationV3(record, { version: 'v3', showTranscripts: true, includeLatency: false });
  const turns = JSON.stringify(turnList);
  // The turns are written last whatever the view's field order (the view puts them last too, so the bytes
  // equal its JSON): the offsets below then bound them.
  const head = `${JSON.stringify(fields).slice(0, -1)},"turns":`;
  const turnsAt = Buffer.byteLength(head);
  return {
    id: record.id,
    project_id: record.project_id,
    environment: record.environment,
    started_at: record.started_at,
    channel: record.channel,
    variant_id: record.variant_id,
    variant_name: record.variant_name,
    in_progress: false,
    snapshot_version: record.snapshot_version ?? 0,
    json: Buffer.from(`${head}${turns}}`),
    turns_at: turnsAt,
    turns_end: turnsAt + Buffer.byteLength(turns),
    personal: holdsPersonalData(turnList, fields.state, fields as Record<string, unknown>),
  };
}

/** A document's JSON bytes, as a Buffer (both store backends return binary fields as bytes). */
export function jsonOf(doc: ConversationDocument): Buffer {
  const bytes = doc.json instanceof Uint8Array ? doc.json : new Uint8Array(0);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A document's v3 JSON as byte chunks to send: whole, or with the turns array replaced by `[]` (transcripts hidden). */
export function documentJson(doc: ConversationDocument, showTranscripts: boolean): Buffer[] {
  return showTranscripts ? [jsonOf(doc)] : withoutTurns(doc);
}

/** The document's JSON with the turns array replaced by `[]` (transcripts hidden). */
export function withoutTurns(doc: ConversationDocument): Buffer[] {
  const json = jsonOf(doc);
  return [json.subarray(0, doc.turns_at), EMPTY_TURNS, json.subarray(doc.turns_end)];
}

const EMPTY_TURNS = Buffer.from('[]');
