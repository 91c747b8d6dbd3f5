/**
 * Records derived from the conversation record for the read APIs, written by the conversation actor's
 * projection next to the record itself (same group commit):
 *
 * - `conversation_terms`: a posting per (conversation, side, term), side `u` (user turns) or `a` (agent
 *   turns), indexed by project, environment, term and start time: the text index of transcript search.
 *   Postings are only ever added (a turn never changes once recorded), with deterministic ids, so writing
 *   one twice is harmless.
 * - `conversation_vectors`: one compact summary per conversation (the filter fields, start and end, its
 *   latest embedding quantised to int8, and its slot), indexed by project, environment (and whether in
 *   progress) and start time.
 * - `conversation_hours`: how many conversations started in each hour per project and environment. A page
 *   is read in time windows sized from these counts, and the count a conversation gets on its first
 *   write picks its slot.
 * - slots (`slots.ts`): the conversations that started in one hour, by hundreds (`<hour>/0` holds the
 *   first 100, ...): `conversation_spans` (start, end and filter fields of each, written when it starts and
 *   when it ends) and `conversation_vector_buckets` (the final embedding of each, written when it ends),
 *   packed. A week of concurrency, random sampling or semantic search reads about one record per hundred
 *   conversations, and a write rewrites a record of at most a hundred entries however busy the project is.
 *
 * Per turn the projection analyses only the new turns (a small in-memory cache per live conversation
 * keeps the terms seen so far; after a restart the conversation is analysed once in full) and adds
 * postings for terms the conversation did not have yet. The summary and the slot are written when the
 * conversation is first seen (its start, or its first turn after a restart or an eviction from the cache)
 * and when it ends, not at every turn: the Chat API's turns pay for postings only. Semantic search
 * embeds the conversations still in progress from their records at query time. A `project` that fails drops
 * what is cached of the conversation (it may say terms are posted whose writes failed), so the batch's retry
 * analyses the transcript again in full.
 */
import type { Collection, Doc, Store } from '../../store/mod.js';
import { StoreDuplicateError } from '../../store/mod.js';
import { tokenize } from '../responder/text.js';
import { LiveCache } from '../projection/live-cache.js';
import { dequantise, quantise, type Embedder } from './embedding.js';
import type { ConversationRecord } from './record.js';
import { hourId, spanSlotWriter, vectorSlotWriter, type SpanEntry, type SpanSlot, type VectorSlot } from './slots.js';

export interface ConversationVector extends Doc {
  project_id: string;
  environment: string;
  started_at: string;
  ended_at: string | null;
  in_progress: boolean;
  channel: string;
  variant_id: string;
  variant_name: string;
  asr_lang_code: string;
  from_number: string;
  to_number: string;
  /** The embedder's model; empty while the vector is not computed yet. */
  model: string;
  /** The unit vector, int8 per dimension, base64 (see `quantise`). */
  v: string;
  /** The id of the slot holding its span (and, once ended, its final vector); absent until assigned. */
  slot?: string;
  snapshot_version: number;
}

export interface TermPosting extends Doc {
  project_id: string;
  environment: string;
  /** `u:<term>` or `a:<term>`: an analysed term of the user's or the agent's turns. */
  term: string;
  started_at: string;
  conversation_id: string;
}

export interface HourCount extends Doc {
  project_id: string;
  environment: string;
  /** The hour's start, ISO 8601 (`2026-11-22T09:00:00.000Z`). */
  hour: string;
  count: number;
  /**
   * Changes (a new random token) after every write of the hour's vector slots: a reader that keeps the
   * slots it decoded reads the hour again only when this differs (`slot-cache.ts`). Absent: no vector yet.
   */
  vectors?: string;
  /** The same for the hour's span slots (concurrency, random sampling). */
  spans?: string;
}

/** Conversations per slot. */
export const SLOT_SIZE = 100;

export const conversationVectors = (store: Store): Collection<ConversationVector> =>
  store.collection<ConversationVector>({
    name: 'conversation_vectors',
    indexes: [{ fields: ['project_id', 'environment', 'started_at'] }, { fields: ['project_id', 'environment', 'in_progress', 'started_at'] }],
    readModel: true,
  });

export const conversationSpans = (store: Store): Collection<SpanSlot> =>
  store.collection<SpanSlot>({ name: 'conversation_spans', indexes: [{ fields: ['project_id', 'environment', 'bucket'] }], readModel: true });

export const conversationVectorBuckets = (store: Store): Collection<VectorSlot> =>
  store.collection<VectorSlot>({ name: 'conversation_vector_buckets', indexes: [{ fields: ['project_id', 'environment', 'bucket'] }], readModel: true });

export const conversationTerms = (store: Store): Collection<TermPosting> =>
  store.collection<TermPosting>({ name: 'conversation_terms', indexes: [{ fields: ['project_id', 'environment', 'term', 'started_at'] }], readModel: true });

export const conversationHours = (store: Store): Collection<HourCount> =>
  store.collection<HourCount>({ name: 'conversation_hours', indexes: [{ fields: ['project_id', 'environment', 'hour'] }], readModel: true });

/** Terms are cut to this length: longer "words" are ids or noise, and keys stay small. */
const MAX_TERM = 64;

/** The posting id of a conversation's term on one side. */
export const postingId = (conversationId: string, side: 'u' | 'a', term: string) => `${conversationId}|${side}:${term}`;

/** The analysed terms of a text as transcript search indexes them. */
export function searchTerms(text: string): string[] {
  return tokenize(text).map((t) => t.slice(0, MAX_TERM));
}

/** The start of the hour holding `iso`. */
export function hourOf(iso: string): string {
  return `${iso.slice(0, 13)}:00:00.000Z`;
}

/** The id of an hour count. */
export { hourId } from './slots.js';

/** What the indexer reads of a conversation record. */
export type RecordFields = Pick<
  ConversationRecord,
  | 'project_id' | 'environment' | 'started_at' | 'ended_at' | 'in_progress' | 'channel' | 'variant_id' | 'variant_name'
  | 'asr_lang_code' | 'from_number' | 'to_number' | 'turns'
>;

interface Analysed {
  turns: number;
  /** Every term of the transcript in order (user and agent), for the embedding. */
  terms: string[];
  user: Set<string>;
  agent: Set<string>;
}

/**
 * Live conversations whose analysis is cached (`LiveCache`: beyond it, a conversation is analysed again in
 * full at its next turn), and how long an entry must have been idle before a new one may take its place.
 */
const CACHE_SIZE = 16_384;
const CACHE_IDLE_MS = 60_000;

export interface SearchIndexer {
  /** Writes the derived records of a conversation record of snapshot `version`. Idempotent. */
  project(id: string, record: RecordFields, version: number): Promise<void>;
  /** Drops what is cached of a conversation (its record is new: the read models were reset, maybe by another thread). */
  forget(id: string): void;
}

export function searchIndexer(store: Store, embedder: Embedder, log: (msg: string, err: unknown) => void = () => undefined): SearchIndexer {
  const vectors = conversationVectors(store);
  const terms = conversationTerms(store);
  const hours = conversationHours(store);
  const spans = conversationSpans(store);
  const vectorBuckets = conversationVectorBuckets(store);
  const cache = new LiveCache<Analysed>(CACHE_SIZE, CACHE_IDLE_MS);

  const analyse = (id: string, record: RecordFields): { analysed: Analysed; fresh: { u: string[]; a: string[] }; known: boolean } => {
    let analysed = cache.take(id);
    const known = analysed !== undefined;
    if (!analysed || analysed.turns > record.turns.length) analysed = { turns: 0, terms: [], user: new Set(), agent: new Set() };
    const fresh = { u: [] as string[], a: [] as string[] };
    for (const turn of record.turns.slice(analysed.turns)) {
      const user = searchTerms(turn.user_input);
      const agent = searchTerms(turn.agent_response);
      for (const t of user) if (!analysed.user.has(t)) (analysed.user.add(t), fresh.u.push(t));
      for (const t of agent) if (!analysed.agent.has(t)) (analysed.agent.add(t), fresh.a.push(t));
      // One push per word: a turn of hundreds of thousands of words spread as arguments overflows the stack.
      for (const t of user) analysed.terms.push(t);
      for (const t of agent) analysed.terms.push(t);
    }
    analysed.turns = record.turns.length;
    if (record.in_progress) cache.set(id, analysed);
    return { analysed, fresh, known };
  };

  const summary = (record: RecordFields, version: number) => ({
    project_id: record.project_id,
    environment: record.environment,
    started_at: record.started_at,
    ended_at: record.ended_at,
    in_progress: record.in_progress,
    channel: record.channel,
    variant_id: record.variant_id,
    variant_name: record.variant_name,
    asr_lang_code: record.asr_lang_code,
    from_number: record.from_number,
    to_number: record.to_number,
    snapshot_version: version,
  });

  /** Counts the conversation in its hour; the count picks its slot, which the summary then keeps. */
  const assignSlot = async (id: string, record: RecordFields): Promise<{ slot: string; bucket: string }> => {
    const hour = hourOf(record.started_at);
    const counted = await hours.update(
      { id: hourId(record.project_id, record.environment, hour) },
      { $inc: { count: 1 }, $setOnInsert: { project_id: record.project_id, environment: record.environment, hour } },
      { upsert: true },
    );
    const slot = `${hourId(record.project_id, record.environment, hour)}/${Math.floor(((counted?.count ?? 1) - 1) / SLOT_SIZE)}`;
    await vectors.update({ id }, { $set: { slot } });
    return { slot, bucket: hour };
  };

  const addSpan = spanSlotWriter(spans, hours);
  const addVector = vectorSlotWriter(vectorBuckets, hours);
  const placeOf = (record: RecordFields) => ({ project_id: record.project_id, environment: record.environment, bucket: hourOf(record.started_at) });

  const writeSpan = (id: string, record: RecordFields, slot: string) => {
    const entry: SpanEntry = [
      id, Date.parse(record.started_at), record.in_progress || !record.ended_at ? null : Date.parse(record.ended_at),
      record.channel, record.variant_id, record.variant_name, record.asr_lang_code, record.from_number, record.to_number,
    ];
    return addSpan(slot, placeOf(record), entry);
  };

  const writeFinalVector = (id: string, record: RecordFields, slot: string, model: string, v: string) =>
    addVector(slot, placeOf(record), [id, Date.parse(record.started_at), record.channel, record.variant_id, record.variant_name, model, dequantise(v)]);

  /**
   * Writes the summary unless a newer one is stored. The first write (or one that finds no slot, after a
   * crash between the two) assigns the slot and records the span; the writes of an ended conversation
   * record its end and final vector in the slot.
   */
  const writeSummary = async (id: string, record: RecordFields, version: number, vector: { model: string; v: string } | null): Promise<void> => {
    const fields = summary(record, version);
    let stored = await vectors.update({ id, snapshot_version: { $lt: version } }, { $set: Object.assign(fields, vector) });
    if (!stored) {
      try {
        stored = await vectors.insert({ id, ...fields, ...(vector ?? { model: '', v: '' }) });
      } catch (err) {
        if (err instanceof StoreDuplicateError) return;
        throw err;
      }
    }
    const fresh = stored.slot === undefined;
    const slot = stored.slot ?? (await assignSlot(id, record)).slot;
    if (fresh || !record.in_progress) await writeSpan(id, record, slot);
    if (!record.in_progress && vector?.v) await writeFinalVector(id, record, slot, vector.model, vector.v);
  };

  /**
   * Inserts a posting. `stored` says it may be stored already (the conversation was not in the cache, so its
   * whole transcript is being posted again): it is looked up first, because an insert that throws a duplicate
   * makes the group commit run its whole batch again, one write at a time.
   */
  const post = async (id: string, record: RecordFields, side: 'u' | 'a', term: string, stored: boolean) => {
    if (stored && (await terms.get(postingId(id, side, term)))) return;
    try {
      await terms.insert({
        id: postingId(id, side, term),
        project_id: record.project_id,
        environment: record.environment,
        term: `${side}:${term}`,
        started_at: record.started_at,
        conversation_id: id,
      });
    } catch (err) {
      if (!(err instanceof StoreDuplicateError)) throw err;
    }
  };

  return {
    forget(id) {
      cache.delete(id);
    },
    async project(id, record, version) {
      try {
        await projectRecord(id, record, version);
      } catch (err) {
        // What is cached says which terms are posted and whether the summary is written: after a failure it may
        // say so of writes that never happened, and the retry of the batch would find nothing fresh to write.
        // Dropped, the retry analyses the whole transcript and looks up what is stored.
        cache.delete(id);
        throw err;
      }
    },
  };

  /** Analyses what is new of the record and writes its postings, and its summary when due. */
  async function projectRecord(id: string, record: RecordFields, version: number): Promise<void> {
    const { analysed, fresh, known } = analyse(id, record);
    const writes: Array<Promise<void>> = [];
    try {
      const again = !known;
      for (const t of fresh.u) writes.push(post(id, record, 'u', t, again));
      for (const t of fresh.a) writes.push(post(id, record, 'a', t, again));
      if (known && record.in_progress) {
        // A turn of a conversation this process has seen: its summary and slot are written already.
      } else if (embedder.fromTerms) {
        const v = embedder.fromTerms(analysed.terms);
        writes.push(writeSummary(id, record, version, { model: embedder.model, v: quantise(v) }));
      } else {
        // A remote embedder: the summary is written now without waiting for it (the turn's reply does not
        // wait for a remote call), the vector when it comes, unless a newer snapshot's summary is stored.
        const summaryWritten = writeSummary(id, record, version, null);
        writes.push(summaryWritten);
        if (!record.in_progress) {
          const text = record.turns.map((t) => `${t.user_input}\n${t.agent_response}`).join('\n');
          // The vector goes into the summary's slot, so it waits for the summary (and its slot) to be written:
          // an embedder that answers before that commit would otherwise find no slot and the final vector
          // would never reach it.
          void Promise.all([embedder.embed([text]), summaryWritten])
            .then(async ([[v]]) => {
              const stored = quantise(v);
              const current = await vectors.update({ id, snapshot_version: { $lte: version } }, { $set: { model: embedder.model, v: stored } });
              if (current?.slot && !record.in_progress) await writeFinalVector(id, record, current.slot, embedder.model, stored);
            })
            .catch((err) => log('embedding a conversation failed', err));
        }
      }
    } catch (err) {
      // Thrown with writes under way: they are settled first, so that none of them rejects unobserved.
      await Promise.allSettled(writes);
      throw err;
    }
    await Promise.all(writes);
  }
}
