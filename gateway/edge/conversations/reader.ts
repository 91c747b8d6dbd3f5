/**
 * Reads the rows of a Conversations API request from the store, through the indexes only:
 *
 * - list and transcript modes walk `started_at` order (ties by id) in time windows. Each window is an
 *   indexed range query; its length is chosen from the per-hour conversation counts so that it holds
 *   about the rows still needed (adjusted by how many rows the filters kept so far), so a page of 1,000
 *   reads about 1,000 records however many the time range holds. The walk yields rows as windows are
 *   read, which is what chunked streaming sends.
 * - transcript mode reads, per window, the postings of the query's longest term, checks the other terms
 *   by posting id, then loads the matching records.
 * - semantic mode scores the final vectors of the ended conversations (slots) and the summaries of those
 *   in progress against the query's embedding; random mode samples the span slots.
 *   Both then load only the records of the page.
 */
import type { Collection, Filter } from '../../../store/mod.js';
import type { ConversationRecord } from '../../../actors/conversation/record.js';
import type { Embedder } from '../../../actors/conversation/embedding.js';
import { ENTRY_SEPARATOR, hourOf, latestSpans, postingId, slotVectors, searchTerms, type ConversationVector, type HourCount, type SpanBucket, type TermPosting, type VectorBucket } from '../../../actors/conversation/search.js';
import type { ListQuery } from './query.js';
import type { Position } from './cursor.js';

export interface ReadSources {
  records: Collection<ConversationRecord>;
  vectors: Collection<ConversationVector>;
  terms: Collection<TermPosting>;
  hours: Collection<HourCount>;
  spans: Collection<SpanBucket>;
  vectorBuckets: Collection<VectorBucket>;
  embedder: Embedder;
}

/** The rows of one response, streamed, and where the next page starts (known once the rows are consumed). */
export interface Rows {
  rows: AsyncIterable<ConversationRecord>;
  /** After `rows` is exhausted: whether more rows follow, the next offset and the next cursor position. */
  next(): { more: boolean; nextOffset: number | null; position: Position | null };
}

const HOUR = 3_600_000;
/** A window aims at no fewer rows than this, so that sparse filters do not mean many tiny reads. */
const MIN_WINDOW_ROWS = 64;
/** Assumed share of rows the filters keep, at the least, when sizing the next window. */
const MIN_SELECTIVITY = 0.02;

/** The record filter of everything but the time range. */
function recordFilter(projectId: string, q: ListQuery): Filter {
  const f: Filter = { project_id: projectId, environment: q.environment };
  if (q.channels.length === 1) f.channel = q.channels[0];
  else if (q.channels.length > 1) f.channel = { $in: q.channels };
  if (q.variantId) f.variant_id = q.variantId;
  if (q.variantName) f.variant_name = q.variantName;
  if (q.inProgress !== null) f.in_progress = q.inProgress;
  return f;
}

function timeRange(from: string | null, to: string | null): Filter | undefined {
  if (from === null && to === null) return undefined;
  return { ...(from !== null ? { $gte: from } : {}), ...(to !== null ? { $lt: to } : {}) };
}

const later = (a: string | null, b: string | null) => (a === null ? b : b === null ? a : a > b ? a : b);

/**
 * Rows in (started_at, id) order from `from` (inclusive) to `q.end` (exclusive), strictly after `after`,
 * read window by window; `need` sizes the windows (the consumer may stop early or read on).
 */
async function* walk(
  src: ReadSources,
  projectId: string,
  q: ListQuery,
  after: { startedAt: string; id: string } | null,
  need: number,
  readWindow: (from: string | null, to: string | null) => Promise<ConversationRecord[]>,
): AsyncGenerator<ConversationRecord> {
  let pos = later(q.start, after?.startedAt ?? null);
  const hourFilter: Filter = { project_id: projectId, environment: q.environment };
  const hourRange = timeRange(pos === null ? null : hourOf(pos), q.end);
  if (hourRange) hourFilter.hour = hourRange;
  const hours = await src.hours.find(hourFilter, { sort: { hour: 1 } });
  let h = 0;
  let yielded = 0;
  let estimated = 0;
  let kept = 0;
  for (;;) {
    const selectivity = estimated > 0 ? Math.max(kept / estimated, MIN_SELECTIVITY) : 1;
    const target = Math.max(MIN_WINDOW_ROWS, ((need - yielded) / selectivity) * 1.2);
    // The window's end: where the hours' counts add up to `target` (inside an hour, pro rata), else the end.
    let acc = 0;
    let windowEnd: string | null = null;
    const posMs = pos === null ? -Infinity : Date.parse(pos);
    while (h < hours.length) {
      const start = Date.parse(hours[h].hour);
      const from = Math.max(start, posMs);
      const span = start + HOUR - from;
      if (span <= 0) {
        h++;
        continue;
      }
      const count = (hours[h].count * span) / HOUR;
      if (acc + count >= target) {
        const cut = from + Math.ceil(((target - acc) / count) * span);
        acc = target;
        windowEnd = new Date(Math.min(cut, start + HOUR)).toISOString();
        if (cut >= start + HOUR) h++;
        break;
      }
      acc += count;
      h++;
    }
    if (windowEnd !== null && q.end !== null && windowEnd >= q.end) windowEnd = null;
    // No counted hour left: the last window runs to the end of the range (rows without a count included).
    const to = windowEnd ?? q.end;
    const rows = await readWindow(pos, to);
    for (const row of rows) {
      if (after && (row.started_at < after.startedAt || (row.started_at === after.startedAt && row.id <= after.id))) continue;
      yielded++;
      yield row;
    }
    estimated += acc;
    kept += rows.length;
    if (windowEnd === null) return;
    pos = windowEnd;
  }
}

/** The rows of a list or transcript request (keyset order), from `position` or `q.offset`. */
export function keysetRows(src: ReadSources, projectId: string, q: ListQuery, position: Position | null): Rows {
  const after = position?.kind === 'after' ? { startedAt: position.startedAt, id: position.id } : null;
  const skip = position ? 0 : q.offset;
  const base = recordFilter(projectId, q);
  const readRecords = (from: string | null, to: string | null, extra: Filter = {}) => {
    const range = timeRange(from, to);
    return src.records.find({ ...base, ...(range ? { started_at: range } : {}), ...extra }, { sort: { started_at: 1 } });
  };
  let readWindow = (from: string | null, to: string | null) => readRecords(from, to);
  if (q.mode === 'transcript') {
    const terms = [...new Set(searchTerms(q.query))].sort((a, b) => b.length - a.length || (a < b ? -1 : 1));
    const sides = q.turnType === 'user' ? (['u'] as const) : q.turnType === 'agent' ? (['a'] as const) : (['u', 'a'] as const);
    readWindow = async (from, to) => {
      if (terms.length === 0) return [];
      const range = timeRange(from, to);
      const postings = await src.terms.find({
        project_id: projectId,
        environment: q.environment,
        term: { $in: sides.map((s) => `${s}:${terms[0]}`) },
        ...(range ? { started_at: range } : {}),
      });
      let ids = [...new Set(postings.map((p) => p.conversation_id))];
      for (const term of terms.slice(1)) {
        if (ids.length === 0) break;
        const found = await src.terms.find({ id: { $in: ids.flatMap((id) => sides.map((s) => postingId(id, s, term))) } });
        const has = new Set(found.map((p) => p.conversation_id));
        ids = ids.filter((id) => has.has(id));
      }
      return ids.length === 0 ? [] : readRecords(from, to, { id: { $in: ids } });
    };
  }
  const need = skip + q.limit + 1;
  let more = false;
  let last: ConversationRecord | null = null;
  async function* rows(): AsyncGenerator<ConversationRecord> {
    let seen = 0;
    const it = walk(src, projectId, q, after, need, readWindow);
    for await (const row of it) {
      seen++;
      if (seen <= skip) continue;
      if (seen > skip + q.limit) {
        more = true;
        break;
      }
      last = row;
      yield row;
    }
    await it.return(undefined);
  }
  return {
    rows: rows(),
    next: () => ({
      more,
      nextOffset: more ? skip + q.limit : null,
      position: more && last ? { kind: 'after', startedAt: (last as ConversationRecord).started_at, id: (last as ConversationRecord).id } : null,
    }),
  };
}

/** The slot filter of a time range (slots hold an hour's start times; entries are checked against the exact range). */
function bucketFilter(projectId: string, q: ListQuery): Filter {
  const range = timeRange(q.start === null ? null : hourOf(q.start), q.end);
  return { project_id: projectId, environment: q.environment, ...(range ? { bucket: range } : {}) };
}

/** A test of an entry's fields against the request's filters (time bounds parsed once). */
function entryFilter(q: ListQuery): (startMs: number, channel: string, variantId: string, variantName: string) => boolean {
  const from = q.start === null ? -Infinity : Date.parse(q.start);
  const to = q.end === null ? Infinity : Date.parse(q.end);
  const channels = q.channels.length > 0 ? new Set(q.channels) : null;
  return (startMs, channel, variantId, variantName) =>
    startMs >= from && startMs < to && (channels === null || channels.has(channel)) &&
    (!q.variantId || variantId === q.variantId) && (!q.variantName || variantName === q.variantName);
}

/** Scores stored vectors (base64 int8) against a query, decoding each into one reused buffer. */
function scorer(query: Float32Array): (stored: string) => number {
  const scratch = Buffer.alloc(Math.max(query.length, 1) + 8);
  const view = new Int8Array(scratch.buffer, scratch.byteOffset, scratch.length);
  return (stored) => {
    const n = scratch.write(stored, 'base64');
    if (n !== query.length) return 0;
    let dot = 0;
    for (let i = 0; i < n; i++) dot += query[i] * view[i];
    return dot / 127;
  };
}

/**
 * Scores a slot's packed vector entries (`packVectorEntry`) without splitting them: the fields are found by
 * position and compared in place, and only the entries that pass the filters have their id and vector cut
 * out. The last entry of a conversation wins, as in `slotVectors`.
 */
function scoreSlot(
  entries: string[],
  model: string,
  q: ListQuery,
  score: (stored: string) => number,
  add: (id: string, start: number, score: number) => void,
): void {
  const from = q.start === null ? -Infinity : Date.parse(q.start);
  const to = q.end === null ? Infinity : Date.parse(q.end);
  const channels = q.channels.length > 0 ? q.channels : null;
  const ids = new Set<string>();
  const kept: Array<[string, number, number]> = [];
  for (let n = entries.length - 1; n >= 0; n--) {
    const e = entries[n];
    const f0 = e.indexOf(ENTRY_SEPARATOR);
    const f1 = e.indexOf(ENTRY_SEPARATOR, f0 + 1);
    const f2 = e.indexOf(ENTRY_SEPARATOR, f1 + 1);
    const f3 = e.indexOf(ENTRY_SEPARATOR, f2 + 1);
    const f4 = e.indexOf(ENTRY_SEPARATOR, f3 + 1);
    const f5 = e.indexOf(ENTRY_SEPARATOR, f4 + 1);
    if (f5 < 0) continue;
    const id = e.slice(0, f0);
    // Walking backwards, the first entry seen of a conversation is its last.
    if (ids.has(id)) continue;
    ids.add(id);
    if (f5 - f4 - 1 !== model.length || !e.startsWith(model, f4 + 1)) continue;
    const start = Number(e.slice(f0 + 1, f1));
    if (!(start >= from && start < to)) continue;
    if (channels !== null && !channels.some((c) => c.length === f2 - f1 - 1 && e.startsWith(c, f1 + 1))) continue;
    if (q.variantId && !(q.variantId.length === f3 - f2 - 1 && e.startsWith(q.variantId, f2 + 1))) continue;
    if (q.variantName && !(q.variantName.length === f4 - f3 - 1 && e.startsWith(q.variantName, f3 + 1))) continue;
    kept.push([id, start, score(e.slice(f5 + 1))]);
  }
  // Candidates are added in stored order (ties in score are broken by start and id, so the order only
  // matters for equal entries, of which there are none after deduplication).
  for (let k = kept.length - 1; k >= 0; k--) add(kept[k][0], kept[k][1], kept[k][2]);
}

/** Loads records by id, in the given order (ids whose record is gone are skipped). */
async function recordsInOrder(src: ReadSources, ids: string[]): Promise<ConversationRecord[]> {
  if (ids.length === 0) return [];
  const found = new Map((await src.records.find({ id: { $in: ids } })).map((r) => [r.id, r]));
  return ids.map((id) => found.get(id)).filter((r): r is ConversationRecord => r !== undefined);
}

async function* each<T>(items: T[]): AsyncGenerator<T> {
  yield* items;
}

/** The most conversations in progress a semantic search embeds at query time (the earliest in the range). */
export const MAX_LIVE_EMBEDDED = 500;

/** Embeds whole transcripts (user and agent turns) as the indexer does. */
async function embedTranscripts(embedder: Embedder, records: ConversationRecord[]): Promise<Float32Array[]> {
  if (embedder.fromTerms) {
    return records.map((r) => embedder.fromTerms!((r.turns ?? []).flatMap((t) => [...searchTerms(t.user_input), ...searchTerms(t.agent_response)])));
  }
  return embedder.embed(records.map((r) => (r.turns ?? []).map((t) => `${t.user_input}\n${t.agent_response}`).join('\n')));
}

/** Cosine similarity of two unit vectors (0 when their dimensions differ). */
function similarityOf(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += a[i] * b[i];
  return dot;
}

const byStart = (a: { start: number; id: string }, b: { start: number; id: string }) => a.start - b.start || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * The indexes of the `k` best candidates (score descending, then start, then id), without sorting all of
 * them: a histogram of the scores finds a threshold that keeps at least `k`, and only those are sorted.
 */
export function topK(scores: number[], starts: number[], ids: string[], k: number): number[] {
  const BINS = 1024;
  const bin = (score: number) => Math.min(BINS - 1, Math.max(0, Math.floor(score * BINS)));
  const counts = new Uint32Array(BINS);
  for (const score of scores) counts[bin(score)]++;
  let threshold = 0;
  for (let b = BINS - 1, total = 0; b >= 0; b--) {
    total += counts[b];
    if (total >= k) {
      threshold = b;
      break;
    }
  }
  const keep: number[] = [];
  for (let i = 0; i < scores.length; i++) if (bin(scores[i]) >= threshold) keep.push(i);
  keep.sort((a, b) => scores[b] - scores[a] || starts[a] - starts[b] || (ids[a] < ids[b] ? -1 : ids[a] > ids[b] ? 1 : 0));
  return keep.slice(0, k);
}

/** Semantic search: most similar first; pages by rank (offset or cursor). */
export async function semanticRows(src: ReadSources, projectId: string, q: ListQuery, position: Position | null): Promise<Rows> {
  const offset = position?.kind === 'rank' ? position.offset : q.offset;
  const [query] = await src.embedder.embed([q.query]);
  const model = src.embedder.model;
  const ids: string[] = [];
  const starts: number[] = [];
  const scores: number[] = [];
  const add = (id: string, start: number, score: number) => {
    if (score <= 0) return;
    ids.push(id);
    starts.push(start);
    scores.push(score);
  };
  if (q.inProgress !== true) {
    const passes = entryFilter(q);
    const score = scorer(query);
    for (const doc of await src.vectorBuckets.find(bucketFilter(projectId, q))) {
      const entries = Array.isArray(doc.vectors) ? doc.vectors : [];
      if (entries.every((e) => typeof e === 'string')) {
        scoreSlot(entries as string[], model, q, score, add);
        continue;
      }
      for (const [id, start, channel, variantId, variantName, m, v] of slotVectors(doc)) {
        if (m !== model || !passes(start, channel, variantId, variantName)) continue;
        add(id, start, score(v));
      }
    }
  }
  if (q.inProgress !== false) {
    // Conversations in progress have no final vector yet: they are embedded from their records now.
    const range = timeRange(q.start, q.end);
    const live = await src.records.find(
      { ...recordFilter(projectId, q), in_progress: true, ...(range ? { started_at: range } : {}) },
      { sort: { started_at: 1 }, limit: MAX_LIVE_EMBEDDED },
    );
    const vectors = await embedTranscripts(src.embedder, live);
    live.forEach((r, i) => add(r.id, Date.parse(r.started_at), similarityOf(query, vectors[i])));
  }
  const page = topK(scores, starts, ids, offset + q.limit).slice(offset);
  const more = scores.length > offset + q.limit;
  const rows = await recordsInOrder(src, page.map((i) => ids[i]));
  return {
    rows: each(rows),
    next: () => ({ more, nextOffset: more ? offset + q.limit : null, position: more ? { kind: 'rank', offset: offset + q.limit } : null }),
  };
}

/** Random sampling: up to `limit` conversations of the range, uniformly, returned in chronological order. */
export async function randomRows(src: ReadSources, projectId: string, q: ListQuery): Promise<Rows> {
  const pool: Array<{ id: string; start: number }> = [];
  const passes = entryFilter(q);
  for (const doc of await src.spans.find(bucketFilter(projectId, q))) {
    for (const [id, start, end, channel, variantId, variantName] of latestSpans(doc)) {
      if (!passes(start, channel, variantId, variantName)) continue;
      if (q.inProgress !== null && (end === null) !== q.inProgress) continue;
      pool.push({ id, start });
    }
  }
  const n = Math.min(q.limit, pool.length);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(Math.random() * (pool.length - i));
    [pool[i], pool[j]] = [pool[j], pool[i]];
  }
  const chosen = pool.slice(0, n).sort(byStart);
  const rows = await recordsInOrder(src, chosen.map((d) => d.id));
  return { rows: each(rows), next: () => ({ more: false, nextOffset: null, position: null }) };
}
