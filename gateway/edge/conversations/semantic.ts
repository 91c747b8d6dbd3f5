/**
 * Semantic search (v3 `query_type=semantic`): the query's embedding against the final vectors of the ended
 * conversations (packed vector slots, scored in place) and the transcripts of those in progress (embedded
 * now), most similar first, paged by rank.
 */
import {
  FIELD_END,
  fieldIs,
  fieldNumber,
  HEAD,
  packedVectors,
  readEntry,
  searchTerms,
  type ConversationRecord,
  type Embedder,
  type VectorSlot,
} from '../../../actors/conversation/mod.js';
import type { Position } from './cursor.js';
import type { ListQuery } from './query.js';
import { bucketFilter, each, fieldFilter, HOUR, recordFilter, rowsInOrder, timeRange, type ReadSources, type Rows } from './reader.js';

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
 * Scores the vectors of a slot against `query`: heads are scanned in place (no callback, no copy), vectors
 * read straight from the slot's binary block (`packedVectors` packs a slot written before packing).
 */
function scoreSlot(slot: VectorSlot, model: string, q: ListQuery, query: Float64Array, out: Candidates): void {
  const { heads, block, models } = packedVectors(slot);
  if (models !== null && !models.includes(model)) return;
  const oneModel = models !== null && models.length === 1;
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
    // Float64: the products then need no float32 to float64 conversion.
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
