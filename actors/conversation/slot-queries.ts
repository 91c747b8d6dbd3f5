/**
 * Queries over the packed slots (`slots.ts`), for the read APIs: the packed format (field offsets, the vector
 * block) is read here only, where it is written. `eachSpan` walks a span slot's conversations that pass a
 * filter (concurrency, random sampling); `scoreVectorSlot` scores a vector slot's conversations against a
 * query embedding into `Candidates` (semantic search), which keeps where each candidate's entry starts and
 * reads its id and start only for those that make the page.
 */
import { dotsWith, scoresOf } from './dot.js';
import { eachEntry, entryStart, field, FIELD_END, fieldIs, fieldNumber, HEAD, packedSpans, packedVectors, readEntry, SPAN, type SpanSlot, type VectorSlot } from './slots.js';

/** The room a `Candidates` heap starts with (it doubles as needed, up to the page's depth). */
const INITIAL_HEAP = 1024;

/** An hour, in ms: a slot holds the conversations that started in one. */
const HOUR = 3_600_000;

/** The filters of a slot scan: start times in [from, to), channels (any when empty), variant id or name. */
export interface SlotQuery {
  from: number;
  to: number;
  channels: string[];
  variantId: string | null;
  variantName: string | null;
}

/** The test of an entry's filter fields, compared in place (see `eachEntry`). */
function fieldFilter(q: SlotQuery, k: { channel: number; variantId: number; variantName: number }): (text: string, at: Int32Array) => boolean {
  const channels = q.channels.length > 0 ? q.channels : null;
  return (text, at) =>
    (channels === null || channels.some((c) => fieldIs(text, at, k.channel, c))) &&
    (!q.variantId || fieldIs(text, at, k.variantId, q.variantId)) &&
    (!q.variantName || fieldIs(text, at, k.variantName, q.variantName));
}

/** A span scan's filters: a slot query's, and optionally the language and a phone number (from or to). */
export interface SpanQuery extends SlotQuery {
  language?: ((code: string) => boolean) | null;
  phoneNumber?: string | null;
}

/**
 * Calls `visit(id, start, end, variantId, variantName)` for each conversation of a span slot that passes `q`
 * (end null while in progress). Fields are compared in place; the id and the variant are cut out only when
 * `want` asks for them (else '').
 */
export function eachSpan(
  slot: SpanSlot,
  q: SpanQuery,
  want: { id?: boolean; variant?: boolean },
  visit: (id: string, start: number, end: number | null, variantId: string, variantName: string) => void,
): void {
  const text = packedSpans(slot);
  const passes = fieldFilter(q, SPAN);
  const filtered = q.channels.length > 0 || q.variantId !== null || q.variantName !== null;
  eachEntry(text, SPAN.count, (at) => {
    const start = fieldNumber(text, at, SPAN.start);
    if (!(start >= q.from && start < q.to) || (filtered && !passes(text, at))) return;
    if (q.language && !q.language(field(text, at, SPAN.language))) return;
    if (q.phoneNumber && !fieldIs(text, at, SPAN.from, q.phoneNumber) && !fieldIs(text, at, SPAN.to, q.phoneNumber)) return;
    const end = fieldNumber(text, at, SPAN.end);
    visit(
      want.id ? field(text, at, SPAN.id) : '', start, Number.isNaN(end) ? null : end,
      want.variant ? field(text, at, SPAN.variantId) : '', want.variant ? field(text, at, SPAN.variantName) : '',
    );
  });
}

/**
 * The scored conversations of a semantic search, as columns. A candidate is where its entry starts in a
 * packed text (a slot's heads: id, then start, ...), or, from a scan that read no head, the entry's number
 * (stored as -1 - number); its id and start are read from there only for the candidates that make the page
 * (and for ties).
 */
export class Candidates {
  readonly scores: number[] = [];
  /** How many conversations scored above 0 (kept or not). */
  count = 0;
  private readonly texts: string[] = [];
  private readonly text: number[] = [];
  private readonly at: number[] = [];
  /**
   * A min-heap of the best `want` scores so far: below its least, a candidate cannot make the page. It grows
   * (doubling) as candidates come, so it never holds more than twice the candidates scored, however deep the
   * page: `want` is offset + limit, and the offset may be up to 1e9 (query.ts), far past any project's
   * conversations.
   */
  private best: Float64Array;
  private size = 0;

  /** `want`: how many of the best the caller will take (offset + limit). */
  constructor(private readonly want: number) {
    this.best = new Float64Array(Math.max(1, Math.min(want, INITIAL_HEAP)));
  }

  /** How many scores the heap has room for now (the tests' view of its memory). */
  get capacity(): number {
    return this.best.length;
  }

  /** Registers a packed text whose entries begin with id and start; returns its number. */
  source(text: string): number {
    this.texts.push(text);
    return this.texts.length - 1;
  }

  /** Entry number `index` of `texts[source]` (found when its id or start is read); non-positive scores are dropped. */
  addEntry(source: number, index: number, score: number): void {
    this.addAt(source, -1 - index, score);
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
    let heap = this.best;
    if (this.want === 0) return;
    let i: number;
    if (this.size < this.want) {
      if (this.size === heap.length) {
        const grown = new Float64Array(Math.min(this.want, heap.length * 2));
        grown.set(heap);
        this.best = heap = grown;
      }
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

  /** Where candidate `i`'s entry starts in its text. */
  private entryAt(i: number): number {
    const at = this.at[i];
    return at >= 0 ? at : entryStart(this.texts[this.text[i]], -1 - at);
  }

  idOf = (i: number): string => {
    const text = this.texts[this.text[i]];
    const from = this.entryAt(i);
    return text.slice(from, text.indexOf(FIELD_END, from));
  };

  startOf = (i: number): number => {
    const text = this.texts[this.text[i]];
    const from = text.indexOf(FIELD_END, this.entryAt(i)) + 1;
    let to = text.indexOf(FIELD_END, from);
    if (to < 0) to = text.length;
    return Number(text.slice(from, to));
  };
}

/**
 * Scores the vectors of a slot against `query`: heads are scanned in place (no callback, no copy), the
 * slot's binary block copied once into the dot product's memory (`dot.ts`); each vector that passes `q` is
 * added to `out` with its score. `skip`: ids whose vector is left out (their ids are then read from the heads).
 */
export function scoreVectorSlot(slot: VectorSlot, model: string, q: SlotQuery, query: Float64Array, out: Candidates, skip?: ReadonlySet<string>): void {
  const { heads, block, models, dims: shared } = packedVectors(slot);
  if (models !== null && !models.includes(model)) return;
  const oneModel = models !== null && models.length === 1;
  const { from, to } = q;
  // A slot holds the conversations of one hour: inside the range, their starts need no check.
  const hour = Date.parse(slot.bucket);
  const wholeHour = hour >= from && hour + HOUR <= to;
  const filtered = q.channels.length > 0 || q.variantId !== null || q.variantName !== null;
  const dimension = query.length;
  const source = out.source(heads);
  // Every head passes and shares the query's dimension: the whole block is scored in one call, and no head
  // is read (the page's candidates find theirs by number).
  const skipping = skip !== undefined && skip.size > 0;
  if (oneModel && wholeHour && !filtered && !skipping && shared === dimension && block.length % dimension === 0) {
    const count = block.length / dimension;
    const scores = scoresOf(query, block, count);
    for (let v = 0; v < count; v++) out.addEntry(source, v, scores[v] / 127);
    return;
  }
  const passes = fieldFilter(q, HEAD);
  const dot = dotsWith(query, block);
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
    if (skipping && skip.has(field(heads, at, HEAD.id))) continue;
    out.addAt(source, at[HEAD.id], dot(here, dims) / 127);
  }
}

