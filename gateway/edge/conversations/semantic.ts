/**
 * Semantic search (v3 `query_type=semantic`): the query's embedding against the final vectors of the ended
 * conversations (packed vector slots, scored in place) and the transcripts of those in progress (embedded
 * now), most similar first, paged by rank.
 */
import { Candidates, scoreVectorSlot, searchTerms, type ConversationRecord, type Embedder } from '../../../actors/conversation/mod.js';
import type { Position } from './cursor.js';
import type { ListQuery } from './query.js';
import { bucketFilter, each, recordFilter, rowsInOrder, slotQuery, timeRange, type ReadSources, type Rows } from './reader.js';

// The tests of the candidates' columns import them from here.
export { Candidates };

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
    for (const doc of await src.vectorBuckets.find(bucketFilter(projectId, q))) scoreVectorSlot(doc, model, slotQuery(q), query64, found);
  }
  if (q.inProgress !== false) {
    // Conversations in progress have no final vector yet: they are embedded from their records now.
    const range = timeRange(q.start, q.end);
    const live = await src.records.find(
      Object.assign(recordFilter(projectId, q), { in_progress: true }, range ? { started_at: range } : {}),
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
