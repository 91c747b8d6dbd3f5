/**
 * The `conversation` actor kind's public module: what the rest of the platform may use of it. Gateways,
 * `platform/` and `bin/` import this file, never the files beside it (`test/architecture.test.ts` checks).
 *
 * - The kind, for the worker that hosts it: `conversationKind`.
 * - Asks with a meaning of their own: `bridgeEnded`, for every source of a bridge's end.
 * - Before an ask: what a new conversation would run (`runningContent`, `pickVariant`); whose a conversation
 *   is (`conversationOwner`, from the journal).
 * - The read models' projector (`conversationsProjector`, listed in `actors/projection/registry.ts`), and
 *   the queries over what it writes:
 *   records, documents (ended conversations as JSON bytes, `documentJson`), the values functions marked
 *   personal (`projectedMarksOf`, written before the turns they mask), search (terms, vectors, hour
 *   counts) and the packed slots (spans, vector buckets), read only through the queries of `slot-queries.ts`
 *   (`eachSpan`, `scoreVectorSlot`): the packed format stays in this module.
 * - Personal data (`personal.ts`): a turn and the variables as a key without `pii` reads them.
 * - Rendering: the v3/v2 view of a record. Embeddings: `Embedder` and the one the environment asks for.
 *
 * @module
 */
export { conversationKind, type ConversationReply } from './kind.js';
export { bridgeEnded } from './bridge.js';
export {
  deleteExternalWait,
  externalEventKey,
  externalEventOf,
  externalEventRecords,
  externalWaitRecords,
  type ExternalEventRecord,
  type ExternalWaitRecord,
} from './external.js';
export { startExternalWaitSweeps, sweepExternalWaits } from './external-sweep.js';
export { MAX_EXTERNAL_EVENT_ID } from './effects.js';
export { pickVariant, runningContent, type Running } from './deployment.js';
export { conversationOwner, type ConversationOwner } from './owner.js';
export { conversationRecords, type ConversationRecord } from './record.js';
export { conversationDocuments, documentJson, type ConversationDocument } from './document.js';
export { conversationMarks, marksIn, MAX_MARKED_VALUES, projectedMarksOf } from './marks.js';
export { hasMaskedTurn, maskedFreeText, maskedState, maskedTurn, type Turn } from './personal.js';
export {
  conversationHours,
  conversationSpans,
  conversationTerms,
  conversationVectorBuckets,
  conversationVectors,
  hourOf,
  postingId,
  searchTerms,
  type ConversationVector,
  type HourCount,
  type TermPosting,
} from './search.js';
export { type SpanSlot, type VectorSlot } from './slots.js';
export { Candidates, eachSpan, scoreVectorSlot, type SlotQuery, type SpanQuery } from './slot-queries.js';
export { SlotCache } from './slot-cache.js';
export { conversationV3, type ViewOptions } from './view.js';
export { createEmbedderFromEnv, type Embedder } from './embedding.js';
export { conversationsProjector, type ConversationsProjectorOptions } from './projectors/conversations.js';
