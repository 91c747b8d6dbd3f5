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
 * - random mode samples the span slots, then loads only the rows of the sample; semantic mode is in
 *   `semantic.ts`, on the helpers exported here.
 * - rows are records, or (v2/v3 without latency) the stored documents of ended conversations merged with
 *   the records of those in progress.
 * - for a key that reads transcripts masked (`mask.ts`), transcript mode keeps, of the rows the postings
 *   found, those whose masked turns still hold every term: the postings index raw text, and a match on a
 *   value the key is shown as `[redacted]` would tell it the value is there. The filter is applied to each
 *   window, inside the walk, so pages, offsets and cursors count only the rows the key may find.
 */
import type { Collection, Filter } from '../../../store/mod.js';
import {
  documentJson,
  eachSpan,
  hourOf,
  postingId,
  searchTerms,
  type ConversationDocument,
  type ConversationRecord,
  type ConversationVector,
  type Embedder,
  type HourCount,
  type SlotCache,
  type SpanSlot,
  type TermPosting,
  type VectorSlot,
} from '../../../actors/conversation/mod.js';
import type { ListQuery } from './query.js';
import type { Position } from './cursor.js';
import { maskedTerms, type Masking, type Turn } from './mask.js';

export interface ReadSources {
  records: Collection<ConversationRecord>;
  /** Rendered ended conversations (`document.ts`); read instead of their records when `Rows` may hold them. */
  documents: Collection<ConversationDocument>;
  vectors: Collection<ConversationVector>;
  terms: Collection<TermPosting>;
  hours: Collection<HourCount>;
  /** The vector slots semantic search scores, kept decoded between searches (`SlotCache`). */
  vectorSlots: SlotCache<VectorSlot>;
  /** The span slots of concurrency and random sampling, kept the same way. */
  spanSlots: SlotCache<SpanSlot>;
  embedder: Embedder;
}

/**
 * A row: a conversation's record, or, when the caller accepts them (v2/v3 without latency, once every
 * ended conversation has one), the rendered document of an ended conversation.
 */
export type Row = ConversationRecord | ConversationDocument;

export const isDocument = (row: Row): row is ConversationDocument => 'json' in row && row.json !== undefined;

/** A row's turns: a record's own, or a document's rendered ones (parsed from the bytes of its turns array alone). */
export function turnsOf(row: Row): Turn[] {
  if (!isDocument(row)) return (row.turns ?? []) as unknown as Turn[];
  const turns = JSON.parse(documentJson(row, true)[0].subarray(row.turns_at, row.turns_end).toString()) as unknown;
  return Array.isArray(turns) ? (turns as Turn[]) : [];
}

/**
 * Whether a key without `pii` reads the row as stored, without parsing it: a document whose turns and variables
 * hold no personal data by the rules (`ConversationDocument.personal`, recorded when it was rendered) and no
 * value was marked in.
 */
export const plainDocument = (row: Row, marked: string[]): boolean => isDocument(row) && row.personal === false && marked.length === 0;

/**
 * The rows `keep` accepts, given each row's turns and marked values (the marks of all of them read at once).
 * `keep` must accept every row the masking leaves as it is (the searches keep what masking does not change):
 * a plain document (`plainDocument`) is kept without parsing its turns. The turns of the other documents it
 * keeps are left with the masking (`Masking.kept`), so rendering them parses nothing again.
 */
export async function keepRows(rows: Row[], masking: Masking, keep: (turns: Turn[], marked: string[]) => boolean): Promise<Row[]> {
  if (rows.length === 0) return rows;
  const marks = await masking.marks(rows.map((r) => r.id));
  return rows.filter((r) => {
    const marked = marks.get(r.id) ?? [];
    if (plainDocument(r, marked)) return true;
    const turns = turnsOf(r);
    if (!keep(turns, marked)) return false;
    if (isDocument(r)) masking.kept?.set(r, turns);
    return true;
  });
}

/** The rows of one response, streamed, and where the next page starts (known once the rows are consumed). */
export interface Rows {
  rows: AsyncIterable<Row>;
  /** After `rows` is exhausted: whether more rows follow, the next offset and the next cursor position. */
  next(): { more: boolean; nextOffset: number | null; position: Position | null };
}

export const HOUR = 3_600_000;
/** A window aims at no fewer rows than this, so that sparse filters do not mean many tiny reads. */
const MIN_WINDOW_ROWS = 64;
/** Assumed share of rows the filters keep, at the least, when sizing the next window. */
const MIN_SELECTIVITY = 0.02;

/** The record filter of everything but the time range. */
export function recordFilter(projectId: string, q: ListQuery): Filter {
  const f: Filter = { project_id: projectId, environment: q.environment };
  if (q.channels.length === 1) f.channel = q.channels[0];
  else if (q.channels.length > 1) f.channel = { $in: q.channels };
  if (q.variantId) f.variant_id = q.variantId;
  if (q.variantName) f.variant_name = q.variantName;
  if (q.inProgress !== null) f.in_progress = q.inProgress;
  return f;
}

export function timeRange(from: string | null, to: string | null): Filter | undefined {
  if (from === null && to === null) return undefined;
  return Object.assign(from !== null ? { $gte: from } : {}, to !== null ? { $lt: to } : {});
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
      filter.in_progress === false ? [] : src.records.find(Object.assign({}, filter, { in_progress: true }), { sort }),
    ]);
    return merge(ended, live);
  };
}

/**
 * The rows of a list or transcript request (keyset order), from `position` or `q.offset`; `documents`:
 * whether rows may be documents; `masking`: the caller reads transcripts masked, and transcript mode
 * matches the masked text (null: the raw text).
 */
export function keysetRows(src: ReadSources, projectId: string, q: ListQuery, position: Position | null, documents = false, masking: Masking | null = null): Rows {
  const after = position?.kind === 'after' ? { startedAt: position.startedAt, id: position.id } : null;
  const skip = position ? 0 : q.offset;
  // The rows before this page: a cursor's walk carries its count, so its pages have a next_offset too.
  const before = position?.kind === 'after' ? position.offset : q.offset;
  const base = recordFilter(projectId, q);
  const read = rowReader(src, documents);
  const readRecords = (from: string | null, to: string | null, extra: Filter = {}) => {
    const range = timeRange(from, to);
    return read(Object.assign({}, base, range ? { started_at: range } : {}, extra));
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
      if (ids.length === 0) return [];
      const rows = await readRecords(from, to, { id: { $in: ids } });
      if (!masking) return rows;
      // The postings found the raw text's matches; the key may find only those its masked text still gives.
      return keepRows(rows, masking, (turns, marked) => {
        const found = maskedTerms(turns, marked, sides);
        return terms.every((term) => found.has(term));
      });
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
      nextOffset: more ? before + q.limit : null,
      position: more && last ? { kind: 'after', startedAt: (last as Row).started_at, id: (last as Row).id, offset: before + q.limit } : null,
    }),
  };
}

/** The hours of the slots a request reads (null: all): from the hour of its start to its end. */
export const slotHours = (q: ListQuery): Record<string, string> | null => (timeRange(q.start === null ? null : hourOf(q.start), q.end) as Record<string, string> | undefined) ?? null;

/** A request's filters as a slot scan takes them (`eachSpan`, `scoreVectorSlot`). */
export const slotQuery = (q: ListQuery) => ({
  from: q.start === null ? -Infinity : Date.parse(q.start),
  to: q.end === null ? Infinity : Date.parse(q.end),
  channels: q.channels,
  variantId: q.variantId,
  variantName: q.variantName,
});

/** Loads rows by id, in the given order (ids whose record is gone are skipped); documents first when allowed. */
export async function rowsInOrder(src: ReadSources, ids: string[], documents: boolean): Promise<Row[]> {
  if (ids.length === 0) return [];
  const found = new Map<string, Row>();
  if (documents) for (const d of await src.documents.find({ id: { $in: ids } })) found.set(d.id, d);
  const missing = ids.filter((id) => !found.has(id));
  if (missing.length > 0) for (const r of await src.records.find({ id: { $in: missing } })) found.set(r.id, r);
  return ids.map((id) => found.get(id)).filter((r): r is Row => r !== undefined);
}

export async function* each<T>(items: T[]): AsyncGenerator<T> {
  yield* items;
}

const byStart = (a: { start: number; id: string }, b: { start: number; id: string }) => a.start - b.start || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** Random sampling: up to `limit` conversations of the range, uniformly, returned in chronological order. */
export async function randomRows(src: ReadSources, projectId: string, q: ListQuery, documents = false): Promise<Rows> {
  const pool: Array<{ id: string; start: number }> = [];
  for (const doc of await src.spanSlots.find(projectId, q.environment, slotHours(q))) {
    eachSpan(doc, slotQuery(q), { id: true }, (id, start, end) => {
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
