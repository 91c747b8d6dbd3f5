/**
 * The Concurrent Calls API (contract 4.4, 2.6): per 5-minute interval, the most conversations that were
 * going on at the same moment. Computed from the span slots (`conversation_spans`: start, end, variant,
 * language and numbers of each conversation, by hour of start) by a sweep over start and end events; a
 * conversation still in progress counts as going on until now.
 */
import type { Collection } from '../../../store/mod.js';
import { hourOf, latestSpans, type SpanBucket } from '../../../actors/conversation/search.js';
import { invalid, PlatformError } from '../../../platform/errors.js';
import { oneOf, text, time, type RawQuery } from './params.js';
import { ENVIRONMENTS } from './query.js';

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
  if (startMs === undefined) throw invalid('start_time', 'start_time is required');
  if (endMs === undefined) throw invalid('end_time', 'end_time is required');
  if (endMs <= startMs) throw invalid('end_time', 'end_time must be after start_time');
  if (endMs - startMs > MAX_RANGE_MS) throw invalid('end_time', 'end_time must be at most one week after start_time');
  const slice = text(q, 'slice_by', 64);
  if (slice === 'language' || slice === 'phone_number') {
    throw new PlatformError('SB_UNSUPPORTED', `slice_by=${slice} is reserved and not implemented`);
  }
  if (slice !== undefined && slice !== 'variant') throw invalid('slice_by', 'slice_by must be variant');
  const variantId = text(q, 'variant_id', 128) ?? null;
  const variantName = text(q, 'variant_name', 256) ?? null;
  if (variantId && variantName) throw invalid('variant_name', 'only one of variant_id and variant_name may be given');
  const language = text(q, 'language', 35) ?? null;
  if (language !== null && !/^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$/.test(language)) throw invalid('language', 'language must be a language code such as en or en-GB');
  return {
    start: Math.floor(startMs / INTERVAL_MS) * INTERVAL_MS,
    end: Math.ceil(endMs / INTERVAL_MS) * INTERVAL_MS,
    environment: oneOf(q, 'client_env', ENVIRONMENTS) ?? 'live',
    variantId,
    variantName,
    language,
    phoneNumber: text(q, 'phone_number', 64) ?? null,
    sliceByVariant: slice === 'variant',
  };
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
  // Starts and ends sorted apart (typed arrays sort natively, without a comparator), then merged; at the
  // same instant ends come first: a conversation that ends as another starts is not concurrent with it.
  const n = spans.length;
  const starts = new Float64Array(n);
  const ends = new Float64Array(n);
  for (let k = 0; k < n; k++) {
    starts[k] = spans[k][0];
    ends[k] = Math.max(spans[k][1], spans[k][0] + 1);
  }
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
  buckets: Collection<SpanBucket>,
  projectId: string,
  q: ConcurrencyQuery,
  now = Date.now(),
): Promise<Interval[]> {
  const docs = await buckets.find({
    project_id: projectId,
    environment: q.environment,
    bucket: { $gte: hourOf(new Date(q.start - LOOKBACK_MS).toISOString()), $lt: new Date(q.end).toISOString() },
  });
  const series = new Map<string, { id: string; name: string; spans: Array<[number, number]> }>();
  for (const doc of docs) {
    for (const [, s, end, , variantId, variantName, language, from, to] of latestSpans(doc)) {
      if (s < q.start - LOOKBACK_MS || s >= q.end) continue;
      if (q.variantId && variantId !== q.variantId) continue;
      if (q.variantName && variantName !== q.variantName) continue;
      if (q.language && !languageMatches(language ?? '', q.language)) continue;
      if (q.phoneNumber && from !== q.phoneNumber && to !== q.phoneNumber) continue;
      const e = end === null ? Math.max(now, s) : end;
      if (Math.max(e, s + 1) <= q.start) continue;
      const key = q.sliceByVariant ? variantId : '';
      let entry = series.get(key);
      if (!entry) series.set(key, (entry = { id: variantId, name: variantName, spans: [] }));
      entry.spans.push([s, e]);
    }
  }
  const times: string[] = [];
  for (let t = q.start; t < q.end; t += INTERVAL_MS) times.push(new Date(t).toISOString());
  if (!q.sliceByVariant) {
    const counts = sweep(series.get('')?.spans ?? [], q.start, q.end);
    return times.map((time, i) => ({ time, max_concurrent_conversations: counts[i] }));
  }
  const variants = [...series.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : 1));
  const counts = variants.map((v) => sweep(v.spans, q.start, q.end));
  const out: Interval[] = [];
  times.forEach((time, i) => {
    variants.forEach((v, j) => out.push({ time, max_concurrent_conversations: counts[j][i], variant_id: v.id, variant_name: v.name }));
  });
  return out;
}
