/**
 * The windowed reader against a real LMDB store with hundreds of conversations over many hours, so that a
 * walk spans many windows (cut inside hours, across empty hours, with selective filters): every walk must
 * equal the brute-force answer.
 */
import t from 'tap';
import fc from 'fast-check';
import { conversationRecords, type ConversationRecord } from '../actors/conversation/record.js';
import { conversationHours, conversationSpans, conversationTerms, conversationVectorBuckets, conversationVectors } from '../actors/conversation/search.js';
import { FIELD_END, spanEntries, spanSlotWriter, vectorEntries, vectorSlotWriter, type VectorEntry, type VectorSlot } from '../actors/conversation/slots.js';
import { scoreVectorSlot, type SlotQuery } from '../actors/conversation/slot-queries.js';
import { SlotCache } from '../actors/conversation/slot-cache.js';
import { createOfflineEmbedder } from '../actors/conversation/embedding.js';
import { isDocument, keepRows, keysetRows, randomRows, type ReadSources, type Row } from '../gateway/edge/conversations/reader.js';
import { Candidates, semanticRows, topK } from '../gateway/edge/conversations/semantic.js';
import { conversationDocuments, documentOf, jsonOf, withoutTurns } from '../actors/conversation/document.js';
import { conversationsProjector } from '../actors/conversation/projectors/conversations.js';
import { entryOfRecord } from './helpers/journal-entries.js';
import { conversationV3 } from '../actors/conversation/view.js';
import { parseListQuery } from '../gateway/edge/conversations/query.js';
import type { Position } from '../gateway/edge/conversations/cursor.js';
import { maskedRow, requestMasking, type Masking } from '../gateway/edge/conversations/mask.js';
import { maskedJson, rowJson } from '../gateway/edge/conversations/views.js';
import { storeFor } from './helpers/store.js';
import type { LmdbCollection } from '../store/lmdb/collection.js';

const store = await storeFor(t, 'sb-reader-');
const embedder = createOfflineEmbedder();
// The slot collections, which the reader reads through its caches and these tests also read and write directly.
const spans = conversationSpans(store);
const vectorBuckets = conversationVectorBuckets(store);
const src: ReadSources = {
  records: conversationRecords(store),
  documents: conversationDocuments(store),
  vectors: conversationVectors(store),
  terms: conversationTerms(store),
  hours: conversationHours(store),
  vectorSlots: new SlotCache(conversationHours(store), vectorBuckets, 'vectors', 64 * 1024 * 1024),
  spanSlots: new SlotCache(conversationHours(store), spans, 'spans', 64 * 1024 * 1024),
  embedder,
};
const projector = conversationsProjector({ embedder });
const T0 = Date.parse('2026-03-02T00:00:00.000Z');
const CHANNELS = ['CHAT', 'WEBCHAT', 'SMS'];
const all: ConversationRecord[] = [];

// 600 conversations over 30 hours, denser in some hours, none in others, some sharing a start time.
let seed = 7;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
for (let i = 0; i < 600; i++) {
  const hour = Math.floor(rand() * 30);
  if (hour % 7 === 3) continue;
  const start = T0 + hour * 3_600_000 + (i % 50 === 0 ? 0 : Math.floor(rand() * 3_600_000));
  const topic = i % 5 === 0 ? 'my parking permit expired' : 'when are you open';
  const record = {
    account_id: 'acc', project_id: 'proj', variant_id: i % 4 === 0 ? 'v1' : 'v2', variant_name: i % 4 === 0 ? 'A' : 'B', environment: 'live',
    started_at: new Date(start).toISOString(), ended_at: new Date(start + 60_000).toISOString(), channel: CHANNELS[i % 3], from_number: '', to_number: '',
    in_progress: i % 6 === 0, num_turns: 1, total_duration: 60, polyai_duration: 60, handoff: false, handoff_reason: '', handoff_destination: '',
    num_silences: 0, num_ood: 0, metrics: { CALL_DURATION: '60' }, state: i % 7 === 0 ? { callback: '07700 900123', nested: { seen: ['ok', 'jane@example.com'] }, count: 12345678 } : {}, integration_attributes: {}, asr_lang_code: '', tts_lang_code: '',
    function_errors: 0, artifact_version: '', end_reason: '', updated_at: '', snapshot_version: 1,
    turns: [{ user_input: topic, user_input_dtmf: '', user_input_datetime: new Date(start).toISOString(), barge_in: false, agent_response: i % 10 === 0 ? 'Parking is free' : 'We open at nine', agent_response_datetime: new Date(start + 1000).toISOString(), latency: 0, translated_user_input: '', english_agent_response: '', intents: [], entities: {}, is_ood: false, is_silence: false, metadata: {} }],
  } as unknown as ConversationRecord;
  const id = `c${String(i).padStart(4, '0')}`;
  await projector.apply([entryOfRecord({ ...record, id }, i + 1)], store);
  // The record as the projector folded it (durations, counts and metrics derived from the turns).
  all.push((await src.records.get(id))!);
}
// Records of another project and environment never show.
await src.records.insert({ ...all[0], id: 'other-project', project_id: 'other' });
await src.records.insert({ ...all[1], id: 'other-env', environment: 'sandbox' });
all.sort((a, b) => (a.started_at < b.started_at ? -1 : a.started_at > b.started_at ? 1 : a.id < b.id ? -1 : 1));

async function collect(rows: AsyncIterable<Row>): Promise<string[]> {
  const ids: string[] = [];
  for await (const r of rows) ids.push(r.id);
  return ids;
}

async function walk(query: Record<string, string>, documents = false): Promise<string[]> {
  const q = parseListQuery('v3', query);
  const seen: string[] = [];
  let position: Position | null = null;
  for (let pages = 0; pages < 1000; pages++) {
    const rows = keysetRows(src, 'proj', q, position, documents);
    seen.push(...(await collect(rows.rows)));
    position = rows.next().position;
    if (!position) return seen;
  }
  throw new Error('walk did not end');
}

const within = (r: ConversationRecord, from?: string, to?: string) => (!from || r.started_at >= from) && (!to || r.started_at < to);

for (const documents of [false, true]) t.test(`cursor walks over many windows equal the brute-force answer (${documents ? 'documents and in-progress records' : 'records'})`, async (t) => {
  const from = new Date(T0 + 2.5 * 3_600_000).toISOString();
  const to = new Date(T0 + 27.25 * 3_600_000).toISOString();
  t.same(await walk({ limit: '7' }, documents), all.map((r) => r.id), 'everything, no range');
  t.same(await walk({ limit: '13', start_time: from, end_time: to }, documents), all.filter((r) => within(r, from, to)).map((r) => r.id), 'a range cutting hours');
  t.same(await walk({ limit: '5', channel: 'SMS', start_time: from }, documents), all.filter((r) => r.channel === 'SMS' && within(r, from)).map((r) => r.id), 'selective channel');
  t.same(await walk({ limit: '3', variant_name: 'A', in_progress: 'true' }, documents), all.filter((r) => r.variant_name === 'A' && r.in_progress).map((r) => r.id), 'rare rows');
  t.same(await walk({ limit: '9', query_type: 'transcript', query: 'parking', turn_type: 'agent', start_time: from, end_time: to }, documents),
    all.filter((r) => within(r, from, to) && /Parking/.test(r.turns[0].agent_response)).map((r) => r.id), 'transcript mode, agent side');
  t.same(await walk({ limit: '4', query_type: 'transcript', query: 'permit parking', start_time: from, end_time: to }, documents),
    all.filter((r) => within(r, from, to) && /permit/.test(r.turns[0].user_input)).map((r) => r.id), 'every term');
});

t.test('documents: the stored rendering is the record\'s v3 view; pages merge them with records in progress', async (t) => {
  const ended = all.filter((r) => !r.in_progress);
  const docs = await src.documents.find({ project_id: 'proj' });
  t.equal(docs.length, ended.length, 'one document per ended conversation, none for those in progress');
  const byId = new Map(all.map((r) => [r.id, r]));
  t.ok(docs.every((d) => jsonOf(d).toString() === JSON.stringify(conversationV3(byId.get(d.id)!, { version: 'v3', showTranscripts: true, includeLatency: false }))), 'bytes equal the rendered view');
  t.ok(docs.every((d) => Buffer.concat(withoutTurns(d)).toString() === JSON.stringify(conversationV3(byId.get(d.id)!, { version: 'v3', showTranscripts: false, includeLatency: false }))), 'and with transcripts hidden');
  const rows: Row[] = [];
  for await (const r of keysetRows(src, 'proj', parseListQuery('v3', { limit: '1000' }), null, true).rows) rows.push(r);
  t.same(rows.map((r) => isDocument(r)), rows.map((r) => !byId.get(r.id)!.in_progress), 'ended ones as documents, the others as records');
  // A conversation whose document is written but whose record still says in progress shows once, as its document.
  const live = all.find((r) => r.in_progress)!;
  await src.documents.putNewer(documentOf({ ...live, in_progress: false, snapshot_version: 2 }), 'snapshot_version');
  const ids = await walk({ limit: '50' }, true);
  t.same(ids, all.map((r) => r.id), 'no duplicate, no gap');
  await src.documents.delete({ id: live.id });
  for (const mode of [{ sample: 'random', limit: '1000', in_progress: 'false' }, { query_type: 'semantic', query: 'parking permit', limit: '40' }]) {
    const q = parseListQuery('v3', { ...mode, start_time: new Date(T0 - 3_600_000).toISOString(), end_time: new Date(T0 + 31 * 3_600_000).toISOString() });
    const read = async (documents: boolean) => (mode.sample ? randomRows(src, 'proj', q, documents) : semanticRows(src, 'proj', q, null, documents));
    const withDocs = await collect((await read(true)).rows);
    t.ok(withDocs.length > 0, `${mode.sample ?? 'semantic'} mode finds rows`);
    if (!mode.sample) t.same(withDocs, await collect((await read(false)).rows), 'semantic: same rows with documents');
  }
});

t.test('offset pages equal slices of the brute-force answer', async (t) => {
  const q = parseListQuery('v3', { limit: '11', offset: '40', channel: 'WEBCHAT' });
  const rows = keysetRows(src, 'proj', q, null);
  const want = all.filter((r) => r.channel === 'WEBCHAT');
  t.same(await collect(rows.rows), want.slice(40, 51).map((r) => r.id));
  t.same(rows.next().nextOffset, want.length > 51 ? 51 : null);
});

t.test('random samples come from the filtered range, without repeats, in order', async (t) => {
  const from = new Date(T0 + 5 * 3_600_000).toISOString();
  const to = new Date(T0 + 9 * 3_600_000).toISOString();
  const q = parseListQuery('v3', { sample: 'random', limit: '25', start_time: from, end_time: to, channel: 'CHAT' });
  const ids = await collect((await randomRows(src, 'proj', q)).rows);
  const allowed = new Set(all.filter((r) => r.channel === 'CHAT' && within(r, from, to)).map((r) => r.id));
  t.equal(ids.length, Math.min(25, allowed.size));
  t.ok(ids.every((id) => allowed.has(id)));
  t.equal(new Set(ids).size, ids.length);
  t.same(ids, all.filter((r) => ids.includes(r.id)).map((r) => r.id), 'chronological');
});

t.test('Candidates keep every one of the best k (ties included) and count the rest', async (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.constantFrom(-0.2, 0, 0.001, 0.5, 0.5004, 0.9999, 1), fc.integer({ min: 0, max: 5 }), fc.constantFrom('a', 'b', 'c')), { maxLength: 80 }),
      fc.integer({ min: 1, max: 40 }),
      (rows, k) => {
        const found = new Candidates(k);
        rows.forEach((r, i) => found.add(`${r[2]}${i}`, r[1], r[0]));
        const got = topK(found.scores, found.startOf, found.idOf, k).map(found.idOf);
        const want = rows
          .map((r, i) => ({ score: r[0], start: r[1], id: `${r[2]}${i}` }))
          .filter((r) => r.score > 0)
          .sort((a, b) => b.score - a.score || a.start - b.start || (a.id < b.id ? -1 : 1));
        t.same(got, want.slice(0, k).map((r) => r.id));
        t.equal(found.count, want.length);
      },
    ),
    { numRuns: 300 },
  );
});

t.test('Candidates hold room for what was scored, not for the depth asked: a page a billion deep allocates no billion', async (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.constantFrom(-0.2, 0.001, 0.5, 0.5004, 1), fc.integer({ min: 0, max: 5 })), { maxLength: 3000 }),
      fc.constantFrom(1, 7, 1000, 2500, 1_000_000_000, 2_000_002_002),
      (rows, k) => {
        const found = new Candidates(k);
        t.ok(found.capacity <= 1024, 'it starts small');
        rows.forEach((r, i) => found.add(`c${i}`, r[1], r[0]));
        t.ok(found.capacity <= Math.max(1024, 2 * found.count) && found.capacity <= Math.max(1, k), `room for ${found.capacity} after ${found.count} scored, ${k} wanted`);
        const want = rows
          .map((r, i) => ({ score: r[0], start: r[1], id: `c${i}` }))
          .filter((r) => r.score > 0)
          .sort((a, b) => b.score - a.score || a.start - b.start || (a.id < b.id ? -1 : 1));
        t.same(topK(found.scores, found.startOf, found.idOf, Math.min(k, found.scores.length)).map(found.idOf), want.slice(0, k).map((r) => r.id), 'the best k, as before');
      },
    ),
    { numRuns: 60 },
  );
});

t.test('topK equals the first k of a full sort (score, then start, then id)', async (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.constantFrom(0.001, 0.5, 0.5004, 0.9999, 1, 1.0001), fc.integer({ min: 0, max: 5 }), fc.constantFrom('a', 'b', 'c')), { maxLength: 60 }),
      fc.integer({ min: 1, max: 70 }),
      (rows, k) => {
        const scores = rows.map((r) => r[0]);
        const starts = rows.map((r) => r[1]);
        const ids = rows.map((r, i) => `${r[2]}${i}`);
        const all = rows.map((_, i) => i).sort((a, b) => scores[b] - scores[a] || starts[a] - starts[b] || (ids[a] < ids[b] ? -1 : 1));
        t.same(topK(scores, (i) => starts[i], (i) => ids[i], k), all.slice(0, k));
      },
    ),
    { numRuns: 300 },
  );
});

t.test('semantic mode: packed slots rank exactly as slots written before packing, filters and replaced entries included', async (t) => {
  const buckets = await vectorBuckets.find({ project_id: 'proj' });
  t.ok(buckets.length > 1, 'several slots');
  t.ok(buckets.every((b) => typeof b.heads === 'string' && b.block instanceof Uint8Array && b.rev! >= 1 && b.vectors === undefined), 'the indexer writes packed slots');
  // A conversation about parking ends again with other fields: its newest entry replaces the first.
  const dup = buckets.find((b) => vectorEntries(b).some((e) => Number(e[0].slice(1)) % 5 === 0))!;
  const first = vectorEntries(dup).find((e) => Number(e[0].slice(1)) % 5 === 0)!;
  const moved: VectorEntry = [first[0], first[1], first[2] === 'SMS' ? 'CHAT' : 'SMS', first[3], first[4], first[5], first[6]];
  await vectorSlotWriter(vectorBuckets, src.hours)(dup.id, { project_id: 'proj', environment: 'live', bucket: dup.bucket }, moved);
  const after = (await vectorBuckets.get(dup.id))!;
  t.equal(after.rev, dup.rev! + 1, 'the slot\'s revision moves on');
  t.equal(vectorEntries(after).length, vectorEntries(dup).length, 'one entry per conversation');
  t.same(vectorEntries(after).find((e) => e[0] === first[0]), moved, 'the newest entry is stored');

  const from = new Date(T0 + 1.5 * 3_600_000).toISOString();
  const to = new Date(T0 + 26.5 * 3_600_000).toISOString();
  const queries: Array<Record<string, string>> = [
    { query: 'parking permit', limit: '50' },
    { query: 'when do you open', limit: '30', start_time: from, end_time: to },
    { query: 'parking', limit: '40', channel: 'SMS' },
    { query: 'parking', limit: '40', channel: ['SMS', 'CHAT'] as unknown as string },
    { query: 'open', limit: '20', variant_id: 'v1', in_progress: 'false' },
    { query: 'permit', limit: '20', variant_name: 'B', offset: '5' },
    { query: 'parking permit', limit: '500', channel: first[2] },
    { query: 'parking permit', limit: '500', channel: moved[2] },
  ];
  const all30h = { start_time: new Date(T0 - 3_600_000).toISOString(), end_time: new Date(T0 + 31 * 3_600_000).toISOString() };
  const ranked = async () => {
    const out: string[][] = [];
    for (const query of queries) {
      const q = parseListQuery('v3', { query_type: 'semantic', ...all30h, ...query } as Record<string, string>);
      out.push(await collect((await semanticRows(src, 'proj', q, null)).rows));
    }
    return out;
  };
  const packed = await ranked();
  t.ok(packed.every((ids) => ids.length > 0), 'every query finds conversations');
  t.notOk(packed[6].includes(first[0]), 'not found under the channel of its earlier entry');
  t.equal(packed[7].filter((id) => id === first[0]).length, 1, 'found once under the channel of its newest entry');
});

t.test('semantic mode: a slot whose vectors share a dimension is scored without reading its heads, to the same candidates', async (t) => {
  const buckets = await vectorBuckets.find({ project_id: 'proj' });
  t.ok(buckets.length > 1 && buckets.every((b) => b.dims === 128), 'the indexer records the shared dimension');
  const [query] = await embedder.embed(['parking permit']);
  const query64 = Float64Array.from(query);
  const wide: SlotQuery = { from: T0 - 3_600_000, to: T0 + 31 * 3_600_000, channels: [], variantId: null, variantName: null };
  const scan = (slots: VectorSlot[], q: SlotQuery) => {
    const found = new Candidates(10_000);
    for (const slot of slots) scoreVectorSlot(slot, embedder.model, q, query64, found);
    return { count: found.count, scores: found.scores, ids: found.scores.map((_, i) => found.idOf(i)), starts: found.scores.map((_, i) => found.startOf(i)) };
  };
  const headByHead = buckets.map((b) => Object.assign({}, b, { dims: undefined }));
  const fast = scan(buckets, wide);
  t.ok(fast.count > 20, `candidates found: ${fast.count}`);
  t.same(fast, scan(headByHead, wide), 'the same scores (bit for bit), ids and starts as the scan of every head');
  // A head that says another dimension is skipped by the head-by-head scan; the whole-block scan reads no head.
  const slot = buckets.find((b) => b.heads!.split('\u0001').length > 3)!;
  const heads = slot.heads!.split('\u0001').map((h) => h.replace(/\u0000128$/, '\u000064'));
  const told = Object.assign({}, slot, { heads: heads.join('\u0001') });
  t.equal(scan([told], wide).count, scan([slot], wide).count, 'no head read: the whole block scored');
  t.equal(scan([Object.assign({}, told, { dims: undefined })], wide).count, 0, 'read head by head, every head skipped');
  // Filters and ranges that cut an hour read the heads, as before.
  const cut: SlotQuery = { ...wide, from: T0 + 1.5 * 3_600_000 };
  const sms: SlotQuery = { ...wide, channels: ['SMS'] };
  for (const q of [cut, sms]) t.same(scan(buckets, q), scan(headByHead, q));
});

t.test('semantic mode: an offset past every candidate (up to the 1e9 the API takes) is an empty last page', async (t) => {
  const wide = { start_time: new Date(T0 - 3_600_000).toISOString(), end_time: new Date(T0 + 31 * 3_600_000).toISOString() };
  const masking: Masking = { marks: async (ids) => new Map(ids.map((id) => [id, Number(id.slice(1)) % 3 === 0 ? ['parking'] : []])) };
  for (const m of [null, masking]) {
    for (const offset of ['1000000000', '999999999', String(all.length)]) {
      const q = parseListQuery('v3', { query_type: 'semantic', query: 'parking permit', limit: '1000', offset, ...wide });
      const rows = await semanticRows(src, 'proj', q, null, true, m);
      t.same(await collect(rows.rows), [], `offset ${offset}${m ? ', masked' : ''}: no rows`);
      t.same(rows.next(), { more: false, nextOffset: null, position: null }, 'and no next page');
    }
    // From a rank cursor as deep.
    const q = parseListQuery('v3', { query_type: 'semantic', query: 'parking permit', limit: '1000', ...wide });
    const rows = await semanticRows(src, 'proj', q, { kind: 'rank', offset: 1_000_000_000, asOf: Date.now() }, false, m);
    t.same(await collect(rows.rows), [], 'a cursor a billion deep: no rows');
    t.equal(rows.next().more, false);
  }
  // The last rows are still there just before the end.
  const q = parseListQuery('v3', { query_type: 'semantic', query: 'parking permit', limit: '1000', ...wide });
  const ranked = await collect((await semanticRows(src, 'proj', q, null)).rows);
  const tail = parseListQuery('v3', { query_type: 'semantic', query: 'parking permit', limit: '1000', offset: String(ranked.length - 2), ...wide });
  t.same(await collect((await semanticRows(src, 'proj', tail, null)).rows), ranked.slice(-2), 'an offset short of the end: the last rows');
});

t.test('semantic mode: a cursor\'s page reads the records of the conversations in progress when its walk began in the range, not of all that ended since', async (t) => {
  // A walk that began late in the twelfth hour of the data, its cursor read again at the end of it: most
  // conversations ended since, a few of them in progress then within the hour asked.
  const asOf = T0 + 11 * 3_600_000 + 50 * 60_000;
  const from = new Date(T0 + 11 * 3_600_000).toISOString();
  const to = new Date(T0 + 12 * 3_600_000).toISOString();
  const asOfIso = new Date(asOf).toISOString();
  const endedSince = all.filter((r) => !r.in_progress && r.ended_at! > asOfIso);
  const thenInRange = all.filter((r) => r.started_at >= from && r.started_at <= asOfIso && (r.in_progress || r.ended_at! > asOfIso));
  t.ok(endedSince.length > 200 && thenInRange.length > 0, `${endedSince.length} ended since, ${thenInRange.length} of them or in progress in the range`);
  const records = (src.records as LmdbCollection<ConversationRecord>).env.records;
  const get = records.get;
  let reads = 0;
  records.get = function (this: typeof records, ...args: Parameters<typeof get>) {
    if ((args[0] as unknown[])[0] === 'conversations') reads++;
    return get.apply(this, args);
  } as typeof get;
  try {
    const q = parseListQuery('v3', { query_type: 'semantic', query: 'when are you open', limit: '5', start_time: from, end_time: to });
    const rows = await semanticRows(src, 'proj', q, { kind: 'rank', offset: 5, asOf });
    const ids = await collect(rows.rows);
    t.ok(ids.length > 0, 'a page of rows');
    // Those in progress then (embedded), and the page's rows.
    t.ok(reads <= thenInRange.length + 5, `records read: ${reads}`);
  } finally {
    records.get = get;
  }
});

/** The v3 view a masked key's rows are rendered with in these tests. */
const V3 = { version: 'v3' as const, showTranscripts: true, includeLatency: false };

/** What `run` returns and how many JSON texts (those `counted` accepts) were parsed while it ran. */
async function parsesDuring<T>(run: () => T | Promise<T>, counted: (text: string) => boolean = () => true): Promise<{ result: T; parses: number }> {
  const parse = JSON.parse;
  let parses = 0;
  JSON.parse = ((...args: Parameters<typeof JSON.parse>) => (counted(String(args[0])) && parses++, parse(...args))) as typeof JSON.parse;
  try {
    return { result: await run(), parses };
  } finally {
    JSON.parse = parse;
  }
}

t.test('a masked search\'s documents are rendered from the turns its filter parsed: no second parse of them, the same bytes', async (t) => {
  const docs = (await src.documents.find({ project_id: 'proj' })).slice(0, 60);
  t.ok(docs.length > 20, 'documents to render');
  const view = V3;
  // Some rows with marked words (masked turns), some without; the stub's marks through a request's masking.
  const marksFor = (id: string) => (Number(id.slice(1)) % 3 === 0 ? ['parking', 'open'] : []);
  const masking: Masking = { marks: async (ids) => new Map(ids.map((id) => [id, marksFor(id)])), kept: requestMasking(store).kept };
  const kept = await keepRows(docs, masking, () => true);
  t.equal(kept.length, docs.length);
  // The fields around the turns are parsed (the state may need masking); the turns, the bulk, never again.
  const { result: rendered, parses } = await parsesDuring(() => kept.map((r) => maskedJson(r, view, marksFor(r.id), masking)), (text) => text.includes('"user_input"'));
  t.equal(parses, 0, 'rendering parses no row\'s turns again');
  let masked = 0;
  kept.forEach((r, i) => {
    const expected = Buffer.concat(maskedRow(rowJson(r, view), marksFor(r.id)));
    const got = Buffer.concat(rendered[i]);
    if (!got.equals(expected)) t.fail(`${r.id}: ${got} != ${expected}`);
    if (got.includes('[redacted]')) masked++;
  });
  t.ok(masked > 0 && masked < kept.length, `byte for byte the row parsed and masked whole (${masked} of ${kept.length} masked)`);
  const states = rendered.filter((parts) => Buffer.concat(parts).includes('"callback":"[redacted]","nested":{"seen":["ok","[redacted]"]},"count":12345678'));
  t.ok(states.length > 0, `states masked too, numbers read as they are (${states.length} rows)`);
  // A row the filter did not see (a list page) is parsed to be masked, as before.
  const unseen = (await src.documents.find({ project_id: 'proj' }))[0];
  t.same(Buffer.concat(maskedJson(unseen, view, ['parking'], masking)), Buffer.concat(maskedRow(rowJson(unseen, view), ['parking'])));
});

t.test('a document records whether the rules mask it; one they do not is read as stored, unparsed, unless a value was marked in it', async (t) => {
  const view = V3;
  const docs = await src.documents.find({ project_id: 'proj' });
  // `personal` is exactly "masking with no marks changes the row": the stored fact and the parse agree.
  const disagree = docs.filter((d) => d.personal !== !Buffer.concat(maskedRow(rowJson(d, view), [])).equals(jsonOf(d)));
  t.same(disagree.map((d) => d.id), [], 'every document\'s fact equals masking its row');
  const plain = docs.filter((d) => !d.personal);
  t.ok(plain.length > 0 && plain.length < docs.length, `documents of both kinds (${plain.length} of ${docs.length} without personal data)`);
  const masking: Masking = { marks: async (ids) => new Map(ids.map((id) => [id, []])), kept: requestMasking(store).kept };
  const { result: [kept, rendered], parses } = await parsesDuring(async () => [await keepRows(plain, masking, () => false), plain.map((d) => maskedJson(d, view, [], masking))] as const);
  t.equal(parses, 0, 'neither a search\'s filter nor the rendering parses them');
  t.equal(kept.length, plain.length, 'a search keeps them: masking leaves them as they are');
  t.ok(plain.every((d, i) => Buffer.concat(rendered[i]).equals(jsonOf(d))), 'their stored bytes');
  // A marked value is not in the stored fact: such a row is parsed and masked.
  const marked = plain.find((d) => jsonOf(d).includes('"user_input":"my parking permit expired"'))!;
  t.ok(Buffer.concat(maskedJson(marked, view, ['parking'], masking)).includes('"user_input":"[redacted]"'), 'with a marked value, masked');
  t.ok(Buffer.concat(maskedJson(marked, { ...view, showTranscripts: false }, [], masking)).includes('"turns":[]'), 'transcripts hidden: spliced out as for any key');
});

t.test('a record (in progress, or read with latency) is masked as it is rendered: no JSON parsed, the bytes of masking its JSON', async (t) => {
  const records = (await src.records.find({ project_id: 'proj' })).slice(0, 120);
  const marksFor = (id: string) => (Number(id.slice(1)) % 3 === 0 ? ['parking'] : []);
  const masking: Masking = { marks: async (ids) => new Map(ids.map((id) => [id, marksFor(id)])) };
  for (const view of [V3, { ...V3, includeLatency: true }, { version: 'v2' as const, showTranscripts: false, includeLatency: false }]) {
    const { result: rendered, parses } = await parsesDuring(() => records.map((r) => maskedJson(r, view, marksFor(r.id), masking)));
    t.equal(parses, 0, `nothing parsed (${JSON.stringify(view)})`);
    const differ = records.filter((r, i) => !Buffer.concat(rendered[i]).equals(Buffer.concat(maskedRow(rowJson(r, view), marksFor(r.id)))));
    t.same(differ.map((r) => r.id), [], 'byte for byte the row\'s JSON parsed and masked');
    t.ok(rendered.some((parts) => Buffer.concat(parts).includes('[redacted]')), 'some masked');
  }
});

t.test('documentOf: `personal` by property, over turns, variables (names too) and handoff texts that hold personal data or not', async (t) => {
  const view = V3;
  const text = fc.oneof(
    fc.constantFrom('', 'When are you open?', 'My order number is 12345.', 'call me on 07700 900123', 'jane@example.com', 'my card is 4111 1111 1111 1111', 'born on 3 May 1980', 'parking'),
    fc.string({ maxLength: 20 }),
  );
  const turn = fc.record({ user_input: text, agent_response: text, user_input_dtmf: fc.constantFrom('', '1', '4111111111111111', '07700900123'), entities: fc.dictionary(fc.constantFrom('a', 'b'), text, { maxKeys: 2 }) });
  const state = fc.dictionary(fc.oneof(fc.constantFrom('from_', 'to', 'note', 'nested'), text), fc.oneof(text, fc.integer(), fc.record({ deep: text })), { maxKeys: 3 });
  const base = all.find((r) => !r.in_progress)!;
  fc.assert(
    fc.property(fc.array(turn, { maxLength: 4 }), state, text, text, (turns, st, reason, destination) => {
      const record = { ...base, state: st, handoff_reason: reason, handoff_destination: destination, turns: turns.map((x) => ({ ...base.turns[0], ...x })) } as ConversationRecord;
      const doc = documentOf(record);
      return doc.personal === !Buffer.concat(maskedRow(rowJson(doc, view), [])).equals(jsonOf(doc));
    }),
    { numRuns: 2000 },
  );
  t.pass('the stored fact equals masking the rendering');
});

t.test('span slots: one packed entry per conversation; concurrent writers lose no entry', async (t) => {
  const slots = await spans.find({ project_id: 'proj' });
  t.ok(slots.every((s) => typeof s.entries === 'string' && s.spans === undefined), 'the indexer writes packed slots');
  const entries = new Map(slots.map((s) => [s.id, spanEntries(s)]));
  t.equal([...entries.values()].flat().length, all.length, 'one entry per conversation');
  const from = new Date(T0 + 5 * 3_600_000).toISOString();
  const to = new Date(T0 + 9 * 3_600_000).toISOString();
  const q = parseListQuery('v3', { sample: 'random', limit: '1000', start_time: from, end_time: to, in_progress: 'false' });
  t.same(await collect((await randomRows(src, 'proj', q)).rows), all.filter((r) => within(r, from, to) && !r.in_progress).map((r) => r.id), 'and from packed slots');

  // Two writers (as two processes would be) adding to one slot at once: compare-and-set retries, no loss.
  const writers = [spanSlotWriter(spans, src.hours), spanSlotWriter(spans, src.hours)];
  const place = { project_id: 'contended', environment: 'live', bucket: new Date(T0).toISOString() };
  await Promise.all(Array.from({ length: 200 }, (_, i) =>
    writers[i % 2]('contended/0', place, [`k${i}`, T0 + i, i % 3 === 0 ? null : T0 + i + 5, 'CHAT', 'v', 'V', 'en', '', ''])));
  // An entry without an end never replaces one with an end.
  await writers[0]('contended/0', place, ['k1', T0 + 1, null, 'CHAT', 'v', 'V', 'en', '', '']);
  const contended = (await spans.get('contended/0'))!;
  const got = spanEntries(contended);
  t.equal(got.length, 200, 'every entry stored once');
  t.equal(got.find((e) => e[0] === 'k1')![2], T0 + 6, 'an ended entry stays ended');
  t.ok(contended.rev! > 2 && contended.rev! < 200, `writes coalesced (${contended.rev} revisions for 201 entries)`);
});

/**
 * A key that reads transcripts masked (`mask.ts`) must search what it reads. Here most conversations have
 * their user turn masked (a marked value: the masking reads marks through `Masking`, stubbed), so the filter
 * drops most of what the postings and the vectors find: walks by cursor and offset, and semantic pages
 * deep enough that the held candidates run out and are looked for again among more, must still equal the
 * brute-force answer over the masked text.
 */
t.test('masked transcript and semantic search equal the brute-force answer over the masked turns', async (t) => {
  const number = (id: string) => Number(id.slice(1));
  const hidden = (id: string) => number(id) % 25 !== 0;
  const masking: Masking = { marks: async (ids) => new Map(ids.map((id) => [id, hidden(id) ? ['open', 'parking'] : []])) };
  const userSays = (r: ConversationRecord, word: RegExp) => !hidden(r.id) && word.test(r.turns[0].user_input);
  // The agent's answer is masked by the same rule (a marked value in it), and read as it is otherwise.
  const agentSays = (r: ConversationRecord, word: RegExp) => word.test(r.turns[0].agent_response) && !(hidden(r.id) && /open|parking/i.test(r.turns[0].agent_response));
  const from = new Date(T0 + 2.5 * 3_600_000).toISOString();
  const to = new Date(T0 + 27.25 * 3_600_000).toISOString();
  const wide = { start_time: new Date(T0 - 3_600_000).toISOString(), end_time: new Date(T0 + 31 * 3_600_000).toISOString() };
  const walkMasked = async (query: Record<string, string>, documents: boolean) => {
    const q = parseListQuery('v3', { query_type: 'transcript', ...query });
    const seen: string[] = [];
    let position: Position | null = null;
    for (let pages = 0; pages < 1000; pages++) {
      const rows = keysetRows(src, 'proj', q, position, documents, masking);
      seen.push(...(await collect(rows.rows)));
      position = rows.next().position;
      if (!position) return seen;
    }
    throw new Error('walk did not end');
  };
  for (const documents of [false, true]) {
    t.same(await walkMasked({ query: 'permit', limit: '3', start_time: from, end_time: to }, documents),
      all.filter((r) => within(r, from, to) && userSays(r, /permit/)).map((r) => r.id), `user words of masked turns are not found (documents: ${documents})`);
    t.same(await walkMasked({ query: 'open', turn_type: 'user', limit: '2', ...wide }, documents),
      all.filter((r) => userSays(r, /open/)).map((r) => r.id), 'one side: the user\'s');
    t.same(await walkMasked({ query: 'open', limit: '50', ...wide }, documents),
      all.filter((r) => agentSays(r, /open/) || userSays(r, /open/)).map((r) => r.id), 'the agent\'s words are found where its answer is not masked');
    t.same(await walkMasked({ query: 'open', turn_type: 'agent', limit: '50', ...wide }, documents),
      all.filter((r) => agentSays(r, /open/)).map((r) => r.id), 'the agent\'s side alone');
    const q = parseListQuery('v3', { query_type: 'transcript', query: 'permit', limit: '4', offset: '3', ...wide });
    const want = all.filter((r) => userSays(r, /permit/));
    const rows = keysetRows(src, 'proj', q, null, documents, masking);
    t.same(await collect(rows.rows), want.slice(3, 7).map((r) => r.id), 'an offset page counts only what the key may find');
    t.equal(rows.next().nextOffset, want.length > 7 ? 7 : null);
  }

  const range = wide;
  for (const documents of [false, true]) {
    for (const query of ['open', 'parking permit']) {
      // The full ranking, then what the key may find of it, in the same order.
      const everything = await collect((await semanticRows(src, 'proj', parseListQuery('v3', { query_type: 'semantic', query, limit: '1000', ...range }), null, documents)).rows);
      const byId = new Map(all.map((r) => [r.id, r]));
      const turn = (id: string) => byId.get(id)!.turns[0];
      const want = everything.filter((id) => !hidden(id) || !/open|parking/i.test(`${turn(id).user_input} ${turn(id).agent_response}`));
      t.ok(want.length < everything.length / 5, `"${query}": most candidates are left out`);
      const seen: string[] = [];
      let position: Position | null = null;
      for (let pages = 0; pages < 100; pages++) {
        const rows = await semanticRows(src, 'proj', parseListQuery('v3', { query_type: 'semantic', query, limit: '7', ...range }), position, documents, masking);
        seen.push(...(await collect(rows.rows)));
        position = rows.next().position;
        if (!position) break;
      }
      t.same(seen, want, `"${query}": pages by rank equal the ranking without the masked conversations (documents: ${documents})`);
    }
  }
});
