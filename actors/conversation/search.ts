/**
 * Records derived from the conversation record for the read APIs, written by the conversation actor's
 * projection next to the record itself (same group commit):
 *
 * - `conversation_terms`: a posting per (conversation, side, term), side `u` (user turns) or `a` (agent
 *   turns), indexed by project, environment, term and start time: the text index of transcript search.
 *   Postings are only ever added (a turn never changes once recorded), with deterministic ids, so writing
 *   one twice is harmless.
 * - `conversation_vectors`: one compact summary per conversation (the filter fields, start and end, and
 *   its embedding quantised to int8), indexed by project, environment and start time: semantic search,
 *   random sampling and the concurrency series read these instead of whole records.
 * - `conversation_hours`: how many conversations started in each hour per project and environment, so
 *   that a page is read in time windows sized to hold about the rows it needs.
 * - `conversation_spans`: per project, environment and 5-minute bucket of start times, one entry per
 *   conversation (start, end, the filter fields), written when it starts and when it ends: the
 *   concurrency series and random sampling read a week as about 2,000 small records.
 * - `conversation_vector_buckets`: the same buckets holding the final embedding of each conversation
 *   that has ended (written once, at its end): semantic search scores a week from them, plus the
 *   summaries of the conversations still in progress.
 *
 * Per turn the projection analyses only the new turns (a small in-memory cache per live conversation
 * keeps the terms seen so far; after a restart the conversation is analysed once in full), adds postings
 * for terms the conversation did not have yet and rewrites its summary.
 */
import type { Collection, Doc, Store } from '../../store/mod.js';
import { StoreDuplicateError } from '../../store/mod.js';
import { tokenize } from '../responder/text.js';
import { quantise, type Embedder } from './embedding.js';
import type { ConversationRecord } from './record.js';

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
}

/** A conversation in a bucket: [id, start ms, end ms or null (in progress), channel, variant id, variant name, language, from, to]. */
export type SpanEntry = [string, number, number | null, string, string, string, string, string, string];
/** An ended conversation's vector in a bucket: [id, start ms, channel, variant id, variant name, model, vector]. */
export type VectorEntry = [string, number, string, string, string, string, string];

export interface SpanBucket extends Doc {
  project_id: string;
  environment: string;
  /** The bucket's start, ISO 8601. */
  bucket: string;
  spans: Record<string, SpanEntry>;
}

export interface VectorBucket extends Doc {
  project_id: string;
  environment: string;
  bucket: string;
  vectors: Record<string, VectorEntry>;
}

export const BUCKET_MS = 5 * 60_000;

export const conversationVectors = (store: Store): Collection<ConversationVector> =>
  store.collection<ConversationVector>({
    name: 'conversation_vectors',
    indexes: [{ fields: ['project_id', 'environment', 'started_at'] }, { fields: ['project_id', 'environment', 'in_progress', 'started_at'] }],
  });

export const conversationSpans = (store: Store): Collection<SpanBucket> =>
  store.collection<SpanBucket>({ name: 'conversation_spans', indexes: [{ fields: ['project_id', 'environment', 'bucket'] }] });

export const conversationVectorBuckets = (store: Store): Collection<VectorBucket> =>
  store.collection<VectorBucket>({ name: 'conversation_vector_buckets', indexes: [{ fields: ['project_id', 'environment', 'bucket'] }] });

/** The start of the 5-minute bucket holding `ms`, ISO 8601. */
export const bucketOf = (ms: number) => new Date(Math.floor(ms / BUCKET_MS) * BUCKET_MS).toISOString();

/** A conversation id as a field name inside a bucket (dots and dollars would read as paths or operators). */
export const entryKey = (id: string) => id.replace(/[.$]/g, (c) => (c === '.' ? '\uff0e' : '\uff04'));

export const conversationTerms = (store: Store): Collection<TermPosting> =>
  store.collection<TermPosting>({ name: 'conversation_terms', indexes: [{ fields: ['project_id', 'environment', 'term', 'started_at'] }] });

export const conversationHours = (store: Store): Collection<HourCount> =>
  store.collection<HourCount>({ name: 'conversation_hours', indexes: [{ fields: ['project_id', 'environment', 'hour'] }] });

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
export const hourId = (projectId: string, environment: string, hour: string) => `${projectId}|${environment}|${hour}`;

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

/** Live conversations whose analysis is cached; beyond this the oldest entry is dropped (and rebuilt on need). */
const CACHE_SIZE = 4096;

export interface SearchIndexer {
  /** Writes the derived records of a conversation record of snapshot `version`. Idempotent. */
  project(id: string, record: RecordFields, version: number): Promise<void>;
}

export function searchIndexer(store: Store, embedder: Embedder, log: (msg: string, err: unknown) => void = () => undefined): SearchIndexer {
  const vectors = conversationVectors(store);
  const terms = conversationTerms(store);
  const hours = conversationHours(store);
  const spans = conversationSpans(store);
  const vectorBuckets = conversationVectorBuckets(store);
  const cache = new Map<string, Analysed>();

  const analyse = (id: string, record: RecordFields): { analysed: Analysed; fresh: { u: string[]; a: string[] } } => {
    let analysed = cache.get(id);
    cache.delete(id);
    if (!analysed || analysed.turns > record.turns.length) analysed = { turns: 0, terms: [], user: new Set(), agent: new Set() };
    const fresh = { u: [] as string[], a: [] as string[] };
    for (const turn of record.turns.slice(analysed.turns)) {
      const user = searchTerms(turn.user_input);
      const agent = searchTerms(turn.agent_response);
      for (const t of user) if (!analysed.user.has(t)) (analysed.user.add(t), fresh.u.push(t));
      for (const t of agent) if (!analysed.agent.has(t)) (analysed.agent.add(t), fresh.a.push(t));
      analysed.terms.push(...user, ...agent);
    }
    analysed.turns = record.turns.length;
    if (record.in_progress) {
      cache.set(id, analysed);
      if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value as string);
    }
    return { analysed, fresh };
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

  const bucketId = (record: RecordFields) => {
    const bucket = bucketOf(Date.parse(record.started_at));
    return { id: `${record.project_id}|${record.environment}|${bucket}`, bucket };
  };

  /** The conversation's entry in its span bucket (at its start, and again with its end). */
  const writeSpan = async (id: string, record: RecordFields) => {
    const { id: bid, bucket } = bucketId(record);
    const entry: SpanEntry = [
      id, Date.parse(record.started_at), record.in_progress || !record.ended_at ? null : Date.parse(record.ended_at),
      record.channel, record.variant_id, record.variant_name, record.asr_lang_code, record.from_number, record.to_number,
    ];
    await spans.update(
      { id: bid },
      { $set: { [`spans.${entryKey(id)}`]: entry }, $setOnInsert: { project_id: record.project_id, environment: record.environment, bucket } },
      { upsert: true },
    );
  };

  const writeFinalVector = async (id: string, record: RecordFields, model: string, v: string) => {
    const { id: bid, bucket } = bucketId(record);
    const entry: VectorEntry = [id, Date.parse(record.started_at), record.channel, record.variant_id, record.variant_name, model, v];
    await vectorBuckets.update(
      { id: bid },
      { $set: { [`vectors.${entryKey(id)}`]: entry }, $setOnInsert: { project_id: record.project_id, environment: record.environment, bucket } },
      { upsert: true },
    );
  };

  /** Writes the summary unless a newer one is stored; counts the conversation's hour on its first write. */
  const writeSummary = async (
    id: string,
    record: RecordFields,
    fields: ReturnType<typeof summary>,
    vector: { model: string; v: string } | null,
  ): Promise<void> => {
    const updated = await vectors.update({ id, snapshot_version: { $lt: fields.snapshot_version } }, { $set: { ...fields, ...vector } });
    if (updated) {
      if (!record.in_progress) await Promise.all([writeSpan(id, record), vector?.v ? writeFinalVector(id, record, vector.model, vector.v) : null]);
      return;
    }
    try {
      await vectors.insert({ id, ...fields, ...(vector ?? { model: '', v: '' }) });
    } catch (err) {
      if (err instanceof StoreDuplicateError) return;
      throw err;
    }
    await Promise.all([writeSpan(id, record), !record.in_progress && vector?.v ? writeFinalVector(id, record, vector.model, vector.v) : null]);
    const hour = hourOf(fields.started_at);
    await hours.update(
      { id: hourId(fields.project_id, fields.environment, hour) },
      { $inc: { count: 1 }, $setOnInsert: { project_id: fields.project_id, environment: fields.environment, hour } },
      { upsert: true },
    );
  };

  const post = async (id: string, record: RecordFields, side: 'u' | 'a', term: string) => {
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
    async project(id, record, version) {
      const { analysed, fresh } = analyse(id, record);
      const writes: Array<Promise<void>> = [];
      for (const t of fresh.u) writes.push(post(id, record, 'u', t));
      for (const t of fresh.a) writes.push(post(id, record, 'a', t));
      if (embedder.fromTerms) {
        const v = embedder.fromTerms(analysed.terms);
        writes.push(writeSummary(id, record, summary(record, version), { model: embedder.model, v: quantise(v) }));
      } else {
        // A remote embedder: the summary is written now without waiting for it (the turn's reply does not
        // wait for a remote call), the vector when it comes, unless a newer snapshot's summary is stored.
        writes.push(writeSummary(id, record, summary(record, version), null));
        const text = record.turns.map((t) => `${t.user_input}\n${t.agent_response}`).join('\n');
        void embedder
          .embed([text])
          .then(async ([v]) => {
            const stored = quantise(v);
            const current = await vectors.update({ id, snapshot_version: { $lte: version } }, { $set: { model: embedder.model, v: stored } });
            if (current && !record.in_progress) await writeFinalVector(id, record, embedder.model, stored);
          })
          .catch((err) => log('embedding a conversation failed', err));
      }
      await Promise.all(writes);
    },
  };
}
