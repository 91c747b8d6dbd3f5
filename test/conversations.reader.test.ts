/**
 * The windowed reader against a real LMDB store with hundreds of conversations over many hours, so that a
 * walk spans many windows (cut inside hours, across empty hours, with selective filters): every walk must
 * equal the brute-force answer.
 */
import t from 'tap';
import fc from 'fast-check';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../store/mod.js';
import { conversationRecords, type ConversationRecord } from '../actors/conversation/record.js';
import { conversationHours, conversationSpans, conversationTerms, conversationVectorBuckets, conversationVectors, packVectorEntry, searchIndexer, slotVectors, unpackVectorEntry, type RecordFields, type VectorEntry } from '../actors/conversation/search.js';
import { createOfflineEmbedder } from '../actors/conversation/embedding.js';
import { keysetRows, randomRows, semanticRows, topK, type ReadSources } from '../gateway/edge/conversations/reader.js';
import { parseListQuery } from '../gateway/edge/conversations/query.js';
import type { Position } from '../gateway/edge/conversations/cursor.js';
import { removeDir } from './helpers/platform.js';

const dir = mkdtempSync(join(tmpdir(), 'sb-reader-'));
const store = await openStore({ dataDir: dir });
t.teardown(async () => {
  await store.close();
  removeDir(dir);
});
const embedder = createOfflineEmbedder();
const src: ReadSources = {
  records: conversationRecords(store),
  vectors: conversationVectors(store),
  terms: conversationTerms(store),
  hours: conversationHours(store),
  spans: conversationSpans(store),
  vectorBuckets: conversationVectorBuckets(store),
  embedder,
};
const indexer = searchIndexer(store, embedder);
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
    num_silences: 0, num_ood: 0, metrics: { CALL_DURATION: '60', CALL_TURN: [] }, state: {}, integration_attributes: {}, asr_lang_code: '', tts_lang_code: '',
    function_errors: 0, artifact_version: '', end_reason: '', updated_at: '', snapshot_version: 1,
    turns: [{ user_input: topic, user_input_dtmf: '', user_input_datetime: '', barge_in: false, agent_response: i % 10 === 0 ? 'Parking is free' : 'We open at nine', agent_response_datetime: '', latency: 0, translated_user_input: '', english_agent_response: '', intents: [], entities: {}, is_ood: false, is_silence: false, metadata: {} }],
  } as unknown as ConversationRecord;
  const id = `c${String(i).padStart(4, '0')}`;
  await src.records.insert({ ...record, id });
  await indexer.project(id, record as unknown as RecordFields, 1);
  all.push({ ...record, id });
}
// Records of another project and environment never show.
await src.records.insert({ ...all[0], id: 'other-project', project_id: 'other' });
await src.records.insert({ ...all[1], id: 'other-env', environment: 'sandbox' });
all.sort((a, b) => (a.started_at < b.started_at ? -1 : a.started_at > b.started_at ? 1 : a.id < b.id ? -1 : 1));

async function collect(rows: AsyncIterable<ConversationRecord>): Promise<string[]> {
  const ids: string[] = [];
  for await (const r of rows) ids.push(r.id);
  return ids;
}

async function walk(query: Record<string, string>): Promise<string[]> {
  const q = parseListQuery('v3', query);
  const seen: string[] = [];
  let position: Position | null = null;
  for (let pages = 0; pages < 1000; pages++) {
    const rows = keysetRows(src, 'proj', q, position);
    seen.push(...(await collect(rows.rows)));
    position = rows.next().position;
    if (!position) return seen;
  }
  throw new Error('walk did not end');
}

const within = (r: ConversationRecord, from?: string, to?: string) => (!from || r.started_at >= from) && (!to || r.started_at < to);

t.test('cursor walks over many windows equal the brute-force answer', async (t) => {
  const from = new Date(T0 + 2.5 * 3_600_000).toISOString();
  const to = new Date(T0 + 27.25 * 3_600_000).toISOString();
  t.same(await walk({ limit: '7' }), all.map((r) => r.id), 'everything, no range');
  t.same(await walk({ limit: '13', start_time: from, end_time: to }), all.filter((r) => within(r, from, to)).map((r) => r.id), 'a range cutting hours');
  t.same(await walk({ limit: '5', channel: 'SMS', start_time: from }), all.filter((r) => r.channel === 'SMS' && within(r, from)).map((r) => r.id), 'selective channel');
  t.same(await walk({ limit: '3', variant_name: 'A', in_progress: 'true' }), all.filter((r) => r.variant_name === 'A' && r.in_progress).map((r) => r.id), 'rare rows');
  t.same(await walk({ limit: '9', query_type: 'transcript', query: 'parking', turn_type: 'agent', start_time: from, end_time: to }),
    all.filter((r) => within(r, from, to) && /Parking/.test(r.turns[0].agent_response)).map((r) => r.id), 'transcript mode, agent side');
  t.same(await walk({ limit: '4', query_type: 'transcript', query: 'permit parking', start_time: from, end_time: to }),
    all.filter((r) => within(r, from, to) && /permit/.test(r.turns[0].user_input)).map((r) => r.id), 'every term');
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
        t.same(topK(scores, starts, ids, k), all.slice(0, k));
      },
    ),
    { numRuns: 300 },
  );
});

t.test('semantic mode: packed vector entries rank exactly as the unpacked (legacy) ones, filters and duplicates included', async (t) => {
  const buckets = await src.vectorBuckets.find({ project_id: 'proj' });
  t.ok(buckets.length > 1, 'several slots');
  t.ok(buckets.every((b) => b.vectors.every((e) => typeof e === 'string')), 'the indexer writes packed entries');
  // A conversation about parking re-ended with other fields: its last entry counts (here: another channel).
  const dup = buckets.find((b) => slotVectors(b).some((e) => Number(e[0].slice(1)) % 5 === 0))!;
  const first = slotVectors(dup).find((e) => Number(e[0].slice(1)) % 5 === 0)!;
  const moved: VectorEntry = [first[0], first[1], first[2] === 'SMS' ? 'CHAT' : 'SMS', first[3], first[4], first[5], first[6]];
  await src.vectorBuckets.update({ id: dup.id }, { $push: { vectors: packVectorEntry(moved) } });
  t.same(unpackVectorEntry(packVectorEntry(moved)), moved, 'a packed entry unpacks to its fields');

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
  t.equal(packed[7].filter((id) => id === first[0]).length, 1, 'found once under the channel of its last entry');
  // The same slots stored as arrays (as before packing) go through the generic path.
  for (const b of await src.vectorBuckets.find({ project_id: 'proj' })) {
    await src.vectorBuckets.update({ id: b.id }, { $set: { vectors: b.vectors.map((e) => unpackVectorEntry(e)) } });
  }
  t.same(await ranked(), packed, 'same pages from legacy array entries');
});
