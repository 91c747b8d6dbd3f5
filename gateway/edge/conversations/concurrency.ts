/**
 * The Concurrent Calls API (contract 4.4, 2.6): per 5-minute interval, the most conversations that were
 * going on at the same moment. Computed from the span slots (`conversation_spans`: start, end, variant,
 * language and numbers of each conversation, by hour of start) by a sweep over start and end events; a
 * conversation still in progress counts as going on until now.
 */
import { eachSpan, hourOf, type SlotCache, type SpanQuery, type SpanSlot } from '../../../actors/conversation/mod.js';
import { CONVERSATIONS } from '../../../platform/errors.js';
import { oneOf, text, time, type RawQuery } from './params.js';
import { ENVIRONMENTS } from './query.js';
import { toE164 } from '../../../platform/phone-numbers.js';

export const INTERVAL_MS = 5 * 60_000;
export const MAX_RANGE_MS = 7 * 86_400_000;
/**
 * Conversations that started this long before `start_time` are read too, so that one going on across the
 * start is counted. A conversation longer than this that is over is counted from `start_time - LOOKBACK`
 * only if it started within it (documented in the README); in-progress ones always count.
 */
export const LOOKBACK_MS = 86_400_000;

export interface ConcurrencyQuery {
  start: number;
  end: number;
  environment: string;
  variantId: string | null;
  variantName: string | null;
  language: string | null;
  phoneNumber: string | null;
  sliceByVariant: boolean;
}

export function parseConcurrencyQuery(q: RawQuery): ConcurrencyQuery {
  const startMs = time(q, 'start_time');
  const endMs = time(q, 'end_time');
  if (startMs === undefined) throw CONVERSATIONS.PARAM_REQUIRED('start_time');
  if (endMs === undefined) throw CONVERSATIONS.PARAM_REQUIRED('end_time');
  if (endMs <= startMs) throw CONVERSATIONS.RANGE_REVERSED();
  if (endMs - startMs > MAX_RANGE_MS) throw CONVERSATIONS.RANGE_TOO_LONG();
  const slice = text(q, 'slice_by', 64);
  if (slice === 'language' || slice === 'phone_number') {
    throw CONVERSATIONS.SLICE_RESERVED(slice);
  }
  if (slice !== undefined && slice !== 'variant') throw CONVERSATIONS.SLICE_INVALID();
  const variantId = text(q, 'variant_id', 128) ?? null;
  const variantName = text(q, 'variant_name', 256) ?? null;
  if (variantId && variantName) throw CONVERSATIONS.VARIANT_AMBIGUOUS();
  const language = text(q, 'language', 35) ?? null;
  if (language !== null && !/^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$/.test(language)) throw CONVERSATIONS.LANGUAGE_INVALID();
  return {
    start: Math.floor(startMs / INTERVAL_MS) * INTERVAL_MS,
    end: Math.ceil(endMs / INTERVAL_MS) * INTERVAL_MS,
    environment: oneOf(q, 'client_env', ENVIRONMENTS) ?? 'live',
    variantId,
    variantName,
    language,
    phoneNumber: phoneFilter(text(q, 'phone_number', 64)),
    sliceByVariant: slice === 'variant',
  };
}

/**
 * The `phone_number` filter as calls record numbers (E.164). An unencoded `+` in a query string arrives as a
 * space (`?phone_number=+1415…` reads ` 1415…`), and people write numbers with spaces and dashes: whatever
 * parses as an international number is compared in its E.164 form; anything else exactly as given.
 */
function phoneFilter(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  const international = /^\s\d/.test(raw) ? `+${raw.trimStart()}` : raw;
  return toE164(international) ?? raw;
}

export interface Interval {
  time: string;
  max_concurrent_conversations: number;
  variant_id?: string;
  variant_name?: string;
}

/** Whether a conversation's language code is `language` or a regional form of it (`en` matches `en-GB`). */
function languageMatches(code: string, language: string): boolean {
  const a = code.toLowerCase().replace('_', '-');
  const b = language.toLowerCase().replace('_', '-');
  return a === b || a.startsWith(`${b}-`);
}

/** The maximum concurrency per interval of `[start, end)` for conversations spanning `[s, e)`. */
export function sweep(spans: Array<[number, number]>, start: number, end: number): number[] {
  return sweepColumns(spans.map((x) => x[0]), spans.map((x) => x[1]), start, end);
}

/** `sweep` over the starts and ends of the conversations as two columns (no pair per conversation). */
export function sweepColumns(spanStarts: number[], spanEnds: number[], start: number, end: number): number[] {
  // Starts and ends sorted apart (typed arrays sort natively, without a comparator), then merged; at the
  // same instant ends come first: a conversation that ends as another starts is not concurrent with it.
  const n = spanStarts.length;
  const starts = Float64Array.from(spanStarts);
  const ends = new Float64Array(n);
  for (let k = 0; k < n; k++) ends[k] = Math.max(spanEnds[k], spanStarts[k] + 1);
  starts.sort();
  ends.sort();
  const out: number[] = [];
  let i = 0;
  let j = 0;
  let active = 0;
  for (let t = start; t < end; t += INTERVAL_MS) {
    while ((j < n && ends[j] <= t) || (i < n && starts[i] <= t)) {
      if (j < n && ends[j] <= t && (i >= n || ends[j] <= starts[i])) (active--, j++);
      else (active++, i++);
    }
    let max = active;
    const limit = t + INTERVAL_MS;
    for (;;) {
      const nextEnd = j < n ? ends[j] : Infinity;
      const nextStart = i < n ? starts[i] : Infinity;
      if (nextEnd < limit && nextEnd <= nextStart) (active--, j++);
      else if (nextStart < limit) {
        active++;
        i++;
        if (active > max) max = active;
      } else break;
    }
    out.push(max);
  }
  return out;
}

/** The intervals of the response (one series per variant when sliced, interleaved in time order). */
export async function concurrency(
  buckets: Pick<SlotCache<SpanSlot>, 'find'>,
  projectId: string,
  q: ConcurrencyQuery,
  now = Date.now(),
): Promise<Interval[]> {
  const docs = await buckets.find(projectId, q.environment, {
    $gte: hourOf(new Date(q.start - LOOKBACK_MS).toISOString()),
    $lt: new Date(q.end).toISOString(),
  });
  const series = new Map<string, { id: string; name: string; starts: number[]; ends: number[] }>();
  const spanQuery: SpanQuery = {
    from: q.start - LOOKBACK_MS,
    to: q.end,
    channels: [],
    variantId: q.variantId,
    variantName: q.variantName,
    language: q.language ? (code) => languageMatches(code, q.language!) : null,
    phoneNumber: q.phoneNumber,
  };
  for (const doc of docs) {
    eachSpan(doc, spanQuery, { variant: q.sliceByVariant }, (_id, s, end, variantId, variantName) => {
      const e = end === null ? Math.max(now, s) : end;
      if (Math.max(e, s + 1) <= q.start) return;
      const key = q.sliceByVariant ? variantId : '';
      let entry = series.get(key);
      if (!entry) series.set(key, (entry = { id: variantId, name: variantName, starts: [], ends: [] }));
      entry.starts.push(s);
      entry.ends.push(e);
    });
  }
  const times: string[] = [];
  for (let t = q.start; t < q.end; t += INTERVAL_MS) times.push(new Date(t).toISOString());
  if (!q.sliceByVariant) {
    const all = series.get('');
    const counts = sweepColumns(all?.starts ?? [], all?.ends ?? [], q.start, q.end);
    return times.map((time, i) => ({ time, max_concurrent_conversations: counts[i] }));
  }
  const variants = [...series.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : 1));
  const counts = variants.map((v) => sweepColumns(v.starts, v.ends, q.start, q.end));
  const out: Interval[] = [];
  times.forEach((time, i) => {
    variants.forEach((v, j) => out.push({ time, max_concurrent_conversations: counts[j][i], variant_id: v.id, variant_name: v.name }));
  });
  return out;
}
