/**
 * Semantic search (v3 `query_type=semantic`): the query's embedding against the final vectors of the ended
 * conversations (packed vector slots, scored in place) and the transcripts of those in progress (embedded
 * now), most similar first, paged by rank.
 *
 * A cursor walk pages through one ranking: the conversations as they were when its first page was read
 * (`asOf`, carried in the cursor). Ranks recomputed over what is stored at each page would move whenever a
 * conversation is written during the walk (a new one, or a turn that makes one a better match), and a rank
 * offset would then skip some and return others twice. As of `asOf`: a conversation started later is left
 * out; one in progress then is embedded from its turns answered by then (`agent_response_datetime`),
 * whether it is still in progress or has ended since (its final vector holds the later turns, so its slot
 * entry is skipped; those are found by `ended_at` and `started_at` in one index, whose keys the store checks
 * against the range: the records read are of the ones in the range that ended during the walk). A first page
 * ranks as of now, which leaves out nothing stored.
 *
 * A key that reads transcripts masked (`mask.ts`) is never ranked on what it cannot read: the stored
 * vectors were computed from the raw turns, so a conversation's rank against a query that spells a hidden
 * value (an e-mail address, a number) would tell how close the hidden text is to it. Such a key's search
 * leaves out every conversation that has a masked turn, in progress or ended alike (a conversation does not
 * appear or vanish when it ends); the others' vectors are of exactly the text it reads. The turns checked
 * are those the ranking is of (answered by `asOf`): a turn added since neither ranks nor hides it. Embedding the masked
 * text instead would need a second stored vector per conversation, written once its marks are known.
 */
import { Candidates, hasMaskedTurn, hourOf, scoreVectorSlot, searchTerms, type ConversationRecord, type Embedder } from '../../../actors/conversation/mod.js';
import { matcher } from '../../../store/mod.js';
import type { Position } from './cursor.js';
import type { ListQuery } from './query.js';
import { each, keepRows, recordFilter, rowsInOrder, slotHours, slotQuery, timeRange, type ReadSources, type Row, type Rows } from './reader.js';
import type { Masking } from './mask.js';

// The tests of the candidates' columns import them from here.
export { Candidates };

/** The most conversations in progress a semantic search embeds at query time (the earliest in the range). */
export const MAX_LIVE_EMBEDDED = 500;

/** When a turn was answered, in ms (its input's time when the answer's is not a time). */
function answeredAt(turn: { user_input_datetime?: unknown; agent_response_datetime?: unknown }): number {
  const at = Date.parse(String(turn.agent_response_datetime ?? ''));
  return Number.isNaN(at) ? Date.parse(String(turn.user_input_datetime ?? '')) : at;
}

/**
 * The turns a conversation had at `asOf` (ms): those answered by then. A turn is recorded once answered, so
 * one answered later was not stored yet. Turns are in order: the kept ones are a prefix.
 *
 * The converse does not hold, and a walk can shift because of it (docs/conversations.md, Known limitation): a
 * turn is stamped when answered (`turnRecord` in actors/conversation/effects.ts), committed with its step, then
 * folded into the record by the projection thread, so one answered before `asOf` may be missing from the
 * records the first page ranked and present at later pages. The widest window is a chat created with a first
 * message: the start effect stamps the greeting, then asks for the reply, and the step (`conversation.started`
 * and both turns) commits only after the reply, so the conversation has no record at all until then. Exact
 * would be: each turn stamped in the record with its entry's commit time (`JournalEntry.at`), and `asOf` the
 * commit time of the last entry folded into the records when the first page was read (the projector's
 * checkpoint). Not done: the record's stored shape changes (a rebuild), the edge would read the projection's
 * checkpoint, and commit times follow seq order only in the embedded store (MongoDB's batches overlap).
 */
function turnsAsOf<T extends { user_input_datetime?: unknown; agent_response_datetime?: unknown }>(turns: T[], asOf: number): T[] {
  let n = turns.length;
  // A turn without a time (none is recorded so) is kept: nothing says it is later.
  while (n > 0 && answeredAt(turns[n - 1]) > asOf) n--;
  return n === turns.length ? turns : turns.slice(0, n);
}

const byStart = (a: ConversationRecord, b: ConversationRecord) => (a.started_at < b.started_at ? -1 : a.started_at > b.started_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * The conversations of the request in progress at `asOf` (ms), the earliest `MAX_LIVE_EMBEDDED` of the
 * range, with their turns as of then; and, by the hour they started in (their slot's bucket), those of them
 * whose final vector is in a slot already (they ended after `asOf`): the slot scan skips these.
 */
async function inProgressAsOf(
  src: ReadSources,
  projectId: string,
  q: ListQuery,
  start: string | null,
  end: string | null,
  asOf: number,
): Promise<{ live: ConversationRecord[]; endedSince: Map<string, Set<string>> }> {
  const range = timeRange(start, end);
  // The request's filter; the conversations in progress then are those of it in progress now, and those of
  // it that have ended since.
  const filter = Object.assign(recordFilter(projectId, q), range ? { started_at: range } : {});
  const [still, ended] = await Promise.all([
    q.inProgress === false ? [] : src.records.find(Object.assign({}, filter, { in_progress: true }), { sort: { started_at: 1 }, limit: MAX_LIVE_EMBEDDED }),
    // One range of the (project, environment, ended_at, started_at) index, whose keys the store checks against
    // the time range before it reads a record: the records read are those that ended since and started in the
    // range, however long ago the walk began. The rest of the request's filter is matched here (the store's own
    // matcher), so that no index of its other fields is picked to read the whole time range instead.
    src.records.find(Object.assign({ project_id: projectId, environment: q.environment, ended_at: { $gt: new Date(asOf).toISOString() } }, range ? { started_at: range } : {})),
  ]);
  const endedThen = matcher(Object.assign({}, filter, { in_progress: false }));
  const thenLive = ended.filter(endedThen);
  const live = thenLive.length === 0 ? still : [...still, ...thenLive].sort(byStart).slice(0, MAX_LIVE_EMBEDDED);
  // Skipped in the slots: those embedded here only (one cut off by the cap keeps its final vector, rather than
  // being ranked on nothing).
  const endedSince = new Map<string, Set<string>>();
  for (const r of live) {
    if (r.in_progress) continue;
    const hour = hourOf(r.started_at);
    let ids = endedSince.get(hour);
    if (!ids) endedSince.set(hour, (ids = new Set()));
    ids.add(r.id);
  }
  return { live: live.map((r) => Object.assign({}, r, { turns: turnsAsOf(r.turns ?? [], asOf) })), endedSince };
}

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

/**
 * How many ranked candidates a masked key's search checks for masked turns per read, at most; each read asks
 * for a quarter more than the rows still wanted (at least `MIN_CHECK`): most conversations hold no personal
 * data, so a page of 100 reads about 125 rows, not 500.
 */
const CHECK_BATCH = 500;
const MIN_CHECK = 64;

/**
 * Semantic search: most similar first; pages by rank (offset or cursor). `masking`: the caller reads
 * transcripts masked, and conversations with a masked turn are left out before ranks are counted (so
 * offsets and cursors page over what it may find).
 */
export async function semanticRows(
  src: ReadSources,
  projectId: string,
  q: ListQuery,
  position: Position | null,
  documents = false,
  masking: Masking | null = null,
): Promise<Rows> {
  const offset = position?.kind === 'rank' ? position.offset : q.offset;
  // The ranking is of the conversations as they were when the walk began: its first page ranks as of now.
  const asOf = position?.kind === 'rank' ? position.asOf : Date.now();
  // Conversations started after `asOf` are left out: the range ends at it (inclusive) when it ends later.
  const end = q.end === null || Date.parse(q.end) > asOf ? new Date(asOf + 1).toISOString() : q.end;
  const asOfQuery: ListQuery = Object.assign({}, q, { end });
  const [query] = await src.embedder.embed([q.query]);
  const model = src.embedder.model;
  const slots = q.inProgress !== true ? await src.vectorSlots.find(projectId, q.environment, slotHours(asOfQuery)) : [];
  // Conversations in progress at `asOf` have no final vector of then: they are embedded from their records now.
  const { live, endedSince } = await inProgressAsOf(src, projectId, q, q.start, end, asOf);
  const embedded = q.inProgress !== false ? live : [];
  const liveVectors = await embedTranscripts(src.embedder, embedded);
  const scan = slotQuery(asOfQuery);
  /** The candidates scored above 0, of which at least the best `want` are held (`Candidates`). */
  const score = (want: number): Candidates => {
    const found = new Candidates(want);
    // Float64: the products then need no float32 to float64 conversion.
    const query64 = Float64Array.from(query);
    for (const doc of slots) scoreVectorSlot(doc, model, scan, query64, found, endedSince.get(doc.bucket));
    embedded.forEach((r, i) => found.add(r.id, Date.parse(r.started_at), similarityOf(query, liveVectors[i])));
    return found;
  };
  let rows: Row[];
  let more: boolean;
  if (masking) {
    // Conversations left out make room for lower ranks, which `Candidates` drops beyond `want`: a page not
    // filled while some were dropped is looked for again among more (scoring the slots again costs less
    // than the rows checked; twice the page holds it when no more than half of the best are left out).
    let want = 2 * (offset + q.limit + 1);
    for (;;) {
      const found = score(want);
      const page = await unmaskedPage(src, found, offset, q.limit, documents, masking, asOf);
      if (page.complete || found.scores.length >= found.count) {
        ({ rows, more } = page);
        break;
      }
      // Holding them all (`count`) drops none: the next round is the last.
      want = Math.min(want * 4, found.count);
    }
  } else {
    const found = score(offset + q.limit);
    // A page past every candidate is empty: nothing to rank.
    const page = offset >= found.scores.length ? [] : topK(found.scores, found.startOf, found.idOf, offset + q.limit).slice(offset);
    more = found.count > offset + q.limit;
    rows = await rowsInOrder(src, page.map(found.idOf), documents);
  }
  return {
    rows: each(rows),
    next: () => ({ more, nextOffset: more ? offset + q.limit : null, position: more ? { kind: 'rank', offset: offset + q.limit, asOf } : null }),
  };
}

/**
 * The page `[offset, offset + limit)` of the candidates, best first, that have no masked turn, and whether
 * another follows. Candidates are ranked in growing prefixes (`topK` of a larger k begins with the smaller
 * k's answer: the order is total) and checked in rank order, a batch of rows and their marks at a time (sized
 * from the rows still wanted),
 * until the page and one more are found (`complete`) or the held candidates run out: the rows read grow
 * with the depth of the page, as the ranking itself does.
 */
async function unmaskedPage(
  src: ReadSources,
  found: Candidates,
  offset: number,
  limit: number,
  documents: boolean,
  masking: Masking,
  asOf: number,
): Promise<{ rows: Row[]; more: boolean; complete: boolean }> {
  const want = offset + limit + 1;
  const page: Row[] = [];
  let kept = 0;
  let checked = 0;
  let k = Math.max(want, CHECK_BATCH);
  for (;;) {
    const ranked = topK(found.scores, found.startOf, found.idOf, Math.min(k, found.scores.length));
    while (checked < ranked.length && kept < want) {
      const size = Math.min(CHECK_BATCH, Math.max(MIN_CHECK, Math.ceil((want - kept) * 1.25)));
      const batch = ranked.slice(checked, checked + size).map(found.idOf);
      checked += batch.length;
      for (const row of await keepRows(await rowsInOrder(src, batch, documents), masking, (turns, marked) => !hasMaskedTurn(turnsAsOf(turns, asOf), marked))) {
        if (kept >= offset && kept < offset + limit) page.push(row);
        kept++;
        if (kept >= want) break;
      }
    }
    if (kept >= want || ranked.length >= found.scores.length) return { rows: page, more: kept > offset + limit, complete: kept >= want };
    k *= 2;
  }
}
