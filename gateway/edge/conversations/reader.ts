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
import type { ConversationDocument } from '../../../actors/conversation/document.js';
import type { Embedder } from '../../../actors/conversation/embedding.js';
import { hourOf, postingId, searchTerms, type ConversationVector, type HourCount, type TermPosting } from '../../../actors/conversation/search.js';
import { blockOf, eachEntry, field, FIELD_END, fieldIs, fieldNumber, HEAD, readEntry, SPAN, spanEntries, vectorEntries, type SpanSlot, type VectorSlot } from '../../../actors/conversation/slots.js';
import type { ListQuery } from './query.js';
import type { Position } from './cursor.js';

export interface ReadSources {
  records: Collection<ConversationRecord>;
  /** Rendered ended conversations (`document.ts`); read instead of their records when `Rows` may hold them. */
  documents: Collection<ConversationDocument>;
  vectors: Collection<ConversationVector>;
  terms: Collection<TermPosting>;
  hours: Collection<HourCount>;
  spans: Collection<SpanSlot>;
  vectorBuckets: Collection<VectorSlot>;
  embedder: Embedder;
}

/** The rows of one response, streamed, and where the next page starts (known once the rows are consumed). */
/**
 * A row: a conversation's record, or, when the caller accepts them (v2/v3 without latency, once every
 * ended conversation has one), the rendered document of an ended conversation.
 */
export type Row = ConversationRecord | ConversationDocument;

export const isDocument = (row: Row): row is ConversationDocument => 'json' in row && row.json !== undefined;

export interface Rows {
  rows: AsyncIterable<Row>;
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
  readWindow: (from: string | null, to: string | null) => Promise<Row[]>,
): AsyncGenerator<Row> {
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

/**
 * Merges documents and in-progress records, both in (started_at, id) order, into that order. A
 * conversation found in both (its document is written before its record says it ended) is its document.
 */
function merge(documents: Row[], live: Row[]): Row[] {
  if (live.length === 0) return documents;
  if (documents.length === 0) return live;
  const out: Row[] = [];
  let i = 0;
  let j = 0;
  while (i < documents.length || j < live.length) {
    const a = documents[i];
    const b = live[j];
    if (b === undefined) out.push(documents[i++]);
    else if (a === undefined) out.push(live[j++]);
    else if (a.id === b.id) (out.push(a), i++, j++);
    else if (a.started_at < b.started_at || (a.started_at === b.started_at && a.id < b.id)) out.push(documents[i++]);
    else out.push(live[j++]);
  }
  return out;
}

/**
 * Reads the rows of `filter` (records' fields) in (started_at, id) order: with `documents`, the ended
 * conversations from their documents and those in progress from their records; else records only.
 */
function rowReader(src: ReadSources, documents: boolean): (filter: Filter) => Promise<Row[]> {
  return async (filter) => {
    const sort = { started_at: 1 } as const;
    if (!documents || filter.in_progress === true) return src.records.find(filter, { sort });
    const [ended, live] = await Promise.all([
      src.documents.find(filter, { sort }),
      filter.in_progress === false ? [] : src.records.find({ ...filter, in_progress: true }, { sort }),
    ]);
    return merge(ended, live);
  };
}

/**
 * The rows of a list or transcript request (keyset order), from `position` or `q.offset`; `documents`:
 * whether rows may be documents.
 */
export function keysetRows(src: ReadSources, projectId: string, q: ListQuery, position: Position | null, documents = false): Rows {
  const after = position?.kind === 'after' ? { startedAt: position.startedAt, id: position.id } : null;
  const skip = position ? 0 : q.offset;
  const base = recordFilter(projectId, q);
  const read = rowReader(src, documents);
  const readRecords = (from: string | null, to: string | null, extra: Filter = {}) => {
    const range = timeRange(from, to);
    return read({ ...base, ...(range ? { started_at: range } : {}), ...extra });
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
  let last: Row | null = null;
  async function* rows(): AsyncGenerator<Row> {
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
      position: more && last ? { kind: 'after', startedAt: (last as Row).started_at, id: (last as Row).id } : null,
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

/** The test of an entry's filter fields, compared in place (see `eachEntry`). */
function fieldFilter(q: ListQuery, k: { channel: number; variantId: number; variantName: number }): (text: string, at: Int32Array) => boolean {
  const channels = q.channels.length > 0 ? q.channels : null;
  return (text, at) =>
    (channels === null || channels.some((c) => fieldIs(text, at, k.channel, c))) &&
    (!q.variantId || fieldIs(text, at, k.variantId, q.variantId)) &&
    (!q.variantName || fieldIs(text, at, k.variantName, q.variantName));
}

/**
 * The scored conversations of a semantic search, as columns. A candidate is where its entry starts in a
 * packed text (a slot's heads: id, then start, ...); its id and start are read from there only for the
 * candidates that make the page (and for ties).
 */
export class Candidates {
  readonly scores: number[] = [];
  /** How many conversations scored above 0 (kept or not). */
  count = 0;
  private readonly texts: string[] = [];
  private readonly text: number[] = [];
  private readonly at: number[] = [];
  /** A min-heap of the best `want` scores so far: below its least, a candidate cannot make the page. */
  private readonly best: Float64Array;
  private size = 0;

  /** `want`: how many of the best the caller will take (offset + limit). */
  constructor(private readonly want: number) {
    this.best = new Float64Array(Math.max(1, want));
  }

  /** Registers a packed text whose entries begin with id and start; returns its number. */
  source(text: string): number {
    this.texts.push(text);
    return this.texts.length - 1;
  }

  /** The entry of `texts[source]` at `at`; non-positive scores are dropped. */
  addAt(source: number, at: number, score: number): void {
    if (!(score > 0)) return;
    this.count++;
    if (this.size === this.want && score < this.best[0]) return;
    this.keepScore(score);
    this.scores.push(score);
    this.text.push(source);
    this.at.push(at);
  }

  add(id: string, start: number, score: number): void {
    this.addAt(this.source(`${id}${FIELD_END}${start}`), 0, score);
  }

  private keepScore(score: number): void {
    const heap = this.best;
    if (this.want === 0) return;
    let i: number;
    if (this.size < this.want) {
      i = this.size++;
      while (i > 0 && heap[(i - 1) >> 1] > score) {
        heap[i] = heap[(i - 1) >> 1];
        i = (i - 1) >> 1;
      }
      heap[i] = score;
      return;
    }
    // Replace the least and sift down.
    i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= this.size) break;
      const c = l + 1 < this.size && heap[l + 1] < heap[l] ? l + 1 : l;
      if (heap[c] >= score) break;
      heap[i] = heap[c];
      i = c;
    }
    heap[i] = score;
  }

  idOf = (i: number): string => {
    const text = this.texts[this.text[i]];
    const from = this.at[i];
    return text.slice(from, text.indexOf(FIELD_END, from));
  };

  startOf = (i: number): number => {
    const text = this.texts[this.text[i]];
    const from = text.indexOf(FIELD_END, this.at[i]) + 1;
    let to = text.indexOf(FIELD_END, from);
    if (to < 0) to = text.length;
    return Number(text.slice(from, to));
  };
}

/** The dot product of `query` with `dims` int8 components of `block` from `at` (four lanes: fewer dependent adds). */
function dot(query: Float64Array, block: Int8Array, at: number, dims: number): number {
  let d0 = 0;
  let d1 = 0;
  let d2 = 0;
  let d3 = 0;
  let i = 0;
  for (; i + 3 < dims; i += 4) {
    d0 += query[i] * block[at + i];
    d1 += query[i + 1] * block[at + i + 1];
    d2 += query[i + 2] * block[at + i + 2];
    d3 += query[i + 3] * block[at + i + 3];
  }
  for (; i < dims; i++) d0 += query[i] * block[at + i];
  return d0 + d1 + d2 + d3;
}

/**
 * Scores the vectors of a packed slot against `query`: heads are scanned in place (no callback, no copy),
 * vectors read straight from the slot's binary block. Slots written before packing are converted first.
 */
function scoreSlot(slot: VectorSlot, model: string, q: ListQuery, query: Float64Array, out: Candidates): void {
  if (typeof slot.heads !== 'string' || Array.isArray(slot.vectors)) {
    const passes = entryFilter(q);
    for (const [id, start, channel, variantId, variantName, m, v] of vectorEntries(slot)) {
      if (m !== model || v.length !== query.length || !passes(start, channel, variantId, variantName)) continue;
      let dot = 0;
      for (let i = 0; i < v.length; i++) dot += query[i] * v[i];
      out.add(id, start, dot / 127);
    }
    return;
  }
  const models = Array.isArray(slot.models) ? slot.models : null;
  if (models !== null && !models.includes(model)) return;
  const oneModel = models !== null && models.length === 1;
  const heads = slot.heads;
  const block = blockOf(slot);
  const from = q.start === null ? -Infinity : Date.parse(q.start);
  const to = q.end === null ? Infinity : Date.parse(q.end);
  // A slot holds the conversations of one hour: inside the range, their starts need no check.
  const hour = Date.parse(slot.bucket);
  const wholeHour = hour >= from && hour + HOUR <= to;
  const filtered = q.channels.length > 0 || q.variantId !== null || q.variantName !== null;
  const passes = fieldFilter(q, HEAD);
  const dimension = query.length;
  const source = out.source(heads);
  const at = new Int32Array(HEAD.count + 1);
  let offset = 0;
  for (let pos = 0; pos < heads.length; ) {
    pos = readEntry(heads, pos, HEAD.count, at);
    if (at[HEAD.count] < 0) continue;
    const dims = fieldNumber(heads, at, HEAD.dims);
    const here = offset;
    offset += dims;
    if (dims !== dimension || here + dims > block.length || (!oneModel && !fieldIs(heads, at, HEAD.model, model))) continue;
    if (!wholeHour) {
      const start = fieldNumber(heads, at, HEAD.start);
      if (!(start >= from && start < to)) continue;
    }
    if (filtered && !passes(heads, at)) continue;
    out.addAt(source, at[HEAD.id], dot(query, block, here, dims) / 127);
  }
}

/**
 * Calls `visit(id, start, end)` for each conversation of a span slot that passes the request's filters (end
 * null while in progress); fields are compared in place, ids cut out only for those that pass.
 */
function eachSpan(slot: SpanSlot, q: ListQuery, visit: (id: string, start: number, end: number | null) => void): void {
  const from = q.start === null ? -Infinity : Date.parse(q.start);
  const to = q.end === null ? Infinity : Date.parse(q.end);
  if (typeof slot.entries !== 'string' || Array.isArray(slot.spans)) {
    const passes = entryFilter(q);
    for (const [id, start, end, channel, variantId, variantName] of spanEntries(slot)) if (passes(start, channel, variantId, variantName)) visit(id, start, end);
    return;
  }
  const text = slot.entries;
  const passes = fieldFilter(q, SPAN);
  eachEntry(text, SPAN.count, (at) => {
    const start = fieldNumber(text, at, SPAN.start);
    if (!(start >= from && start < to) || !passes(text, at)) return;
    const end = fieldNumber(text, at, SPAN.end);
    visit(field(text, at, SPAN.id), start, Number.isNaN(end) ? null : end);
  });
}

/** Loads rows by id, in the given order (ids whose record is gone are skipped); documents first when allowed. */
async function rowsInOrder(src: ReadSources, ids: string[], documents: boolean): Promise<Row[]> {
  if (ids.length === 0) return [];
  const found = new Map<string, Row>();
  if (documents) for (const d of await src.documents.find({ id: { $in: ids } })) found.set(d.id, d);
  const missing = ids.filter((id) => !found.has(id));
  if (missing.length > 0) for (const r of await src.records.find({ id: { $in: missing } })) found.set(r.id, r);
  return ids.map((id) => found.get(id)).filter((r): r is Row => r !== undefined);
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
export function topK(scores: number[], startOf: (i: number) => number, idOf: (i: number) => string, k: number): number[] {
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
  // Starts and ids are read only for the kept candidates, once each.
  const starts = new Map<number, number>();
  const ids = new Map<number, string>();
  const start = (i: number) => {
    let v = starts.get(i);
    if (v === undefined) starts.set(i, (v = startOf(i)));
    return v;
  };
  const id = (i: number) => {
    let v = ids.get(i);
    if (v === undefined) ids.set(i, (v = idOf(i)));
    return v;
  };
  keep.sort((a, b) => scores[b] - scores[a] || start(a) - start(b) || (id(a) < id(b) ? -1 : id(a) > id(b) ? 1 : 0));
  return keep.slice(0, k);
}

/** Semantic search: most similar first; pages by rank (offset or cursor). */
export async function semanticRows(src: ReadSources, projectId: string, q: ListQuery, position: Position | null, documents = false): Promise<Rows> {
  const offset = position?.kind === 'rank' ? position.offset : q.offset;
  const [query] = await src.embedder.embed([q.query]);
  const model = src.embedder.model;
  const found = new Candidates(offset + q.limit);
  if (q.inProgress !== true) {
    // Float64: the products then need no float32 to float64 conversion (measured about 1.6 times faster).
    const query64 = Float64Array.from(query);
    for (const doc of await src.vectorBuckets.find(bucketFilter(projectId, q))) scoreSlot(doc, model, q, query64, found);
  }
  if (q.inProgress !== false) {
    // Conversations in progress have no final vector yet: they are embedded from their records now.
    const range = timeRange(q.start, q.end);
    const live = await src.records.find(
      { ...recordFilter(projectId, q), in_progress: true, ...(range ? { started_at: range } : {}) },
      { sort: { started_at: 1 }, limit: MAX_LIVE_EMBEDDED },
    );
    const vectors = await embedTranscripts(src.embedder, live);
    live.forEach((r, i) => found.add(r.id, Date.parse(r.started_at), similarityOf(query, vectors[i])));
  }
  const page = topK(found.scores, found.startOf, found.idOf, offset + q.limit).slice(offset);
  const more = found.count > offset + q.limit;
  const rows = await rowsInOrder(src, page.map(found.idOf), documents);
  return {
    rows: each(rows),
    next: () => ({ more, nextOffset: more ? offset + q.limit : null, position: more ? { kind: 'rank', offset: offset + q.limit } : null }),
  };
}

/** Random sampling: up to `limit` conversations of the range, uniformly, returned in chronological order. */
export async function randomRows(src: ReadSources, projectId: string, q: ListQuery, documents = false): Promise<Rows> {
  const pool: Array<{ id: string; start: number }> = [];
  for (const doc of await src.spans.find(bucketFilter(projectId, q))) {
    eachSpan(doc, q, (id, start, end) => {
      if (q.inProgress === null || (end === null) === q.inProgress) pool.push({ id, start });
    });
  }
  const n = Math.min(q.limit, pool.length);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(Math.random() * (pool.length - i));
    [pool[i], pool[j]] = [pool[j], pool[i]];
  }
  const chosen = pool.slice(0, n).sort(byStart);
  const rows = await rowsInOrder(src, chosen.map((d) => d.id), documents);
  return { rows: each(rows), next: () => ({ more: false, nextOffset: null, position: null }) };
}
