/**
 * The vector slots semantic search keeps decoded between searches (`actors/conversation/slot-cache.ts`),
 * over the embedded store, written by the conversations projector as in production: a kept hour is not read
 * again until a slot of it is written; a changed hour is read alone; a rebuild leaves nothing stale; the byte
 * budget holds.
 */
import t from 'tap';
import { conversationHours, conversationSpans, conversationVectorBuckets } from '../actors/conversation/search.js';
import { SlotCache } from '../actors/conversation/slot-cache.js';
import { spanEntries, vectorEntries, type SpanSlot, type VectorSlot } from '../actors/conversation/slots.js';
import { createOfflineEmbedder } from '../actors/conversation/embedding.js';
import { conversationsProjector } from '../actors/conversation/projectors/conversations.js';
import type { ConversationRecord } from '../actors/conversation/record.js';
import type { Collection, Filter } from '../store/mod.js';
import { entryOfRecord } from './helpers/journal-entries.js';
import { storeFor } from './helpers/store.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-03-02T00:00:00.000Z');

function record(id: string, start: number, text: string): ConversationRecord {
  return {
    id, account_id: 'acc', project_id: 'proj', variant_id: 'v', variant_name: 'A', environment: 'live',
    started_at: new Date(start).toISOString(), ended_at: new Date(start + 60_000).toISOString(), channel: 'CHAT', from_number: '', to_number: '',
    in_progress: false, num_turns: 1, total_duration: 60, polyai_duration: 60, handoff: false, handoff_reason: '', handoff_destination: '',
    num_silences: 0, num_ood: 0, metrics: { CALL_DURATION: '60' }, state: {}, integration_attributes: {}, asr_lang_code: '', tts_lang_code: '',
    function_errors: 0, artifact_version: '', end_reason: '', updated_at: '', snapshot_version: 1,
    turns: [{ user_input: text, user_input_dtmf: '', user_input_datetime: new Date(start).toISOString(), barge_in: false, agent_response: 'Noted', agent_response_datetime: new Date(start + 1000).toISOString(), latency: 0, translated_user_input: '', english_agent_response: '', intents: [], entities: {}, is_ood: false, is_silence: false, metadata: {} }],
  } as unknown as ConversationRecord;
}

/** The real collection, with the filters of its `find` calls counted (what the cache read). */
function counted(c: Collection<VectorSlot>): { collection: Collection<VectorSlot>; finds: Filter[] } {
  const finds: Filter[] = [];
  const collection = Object.create(c) as Collection<VectorSlot>;
  collection.find = (filter, options) => (finds.push(filter), c.find(filter, options));
  return { collection, finds };
}

const idsOf = (slots: VectorSlot[]) => slots.flatMap((s) => vectorEntries(s).map((e) => e[0])).sort();

t.test('kept hours are not read again; an hour written since is read alone; a rebuild leaves nothing stale', async (t) => {
  const store = await storeFor(t, 'sb-slot-cache-');
  const projector = conversationsProjector({ embedder: createOfflineEmbedder() });
  let seq = 0;
  const end = (r: ConversationRecord) => projector.apply([entryOfRecord(r, ++seq)], store);
  // 250 conversations over five hours: three slots in the first hour, one in each of the others.
  for (let i = 0; i < 250; i++) await end(record(`c${String(i).padStart(3, '0')}`, T0 + (i < 210 ? 0 : (1 + ((i - 210) % 4)) * HOUR) + i * 1000, `topic ${i % 7} parking`));
  const hours = conversationHours(store);
  const { collection, finds } = counted(conversationVectorBuckets(store));
  const cache = new SlotCache(hours, collection, 'vectors', 64 * 1024 * 1024);
  const week = { $gte: new Date(T0 - HOUR).toISOString(), $lt: new Date(T0 + 6 * HOUR).toISOString() };
  const all = async () => idsOf(await conversationVectorBuckets(store).find({ project_id: 'proj', environment: 'live' }));

  t.same(idsOf(await cache.find('proj', 'live', week)), await all(), 'the first search reads every slot');
  t.equal(finds.length, 1, 'consecutive hours in one query');
  t.ok(cache.size > 0, 'and keeps them');
  finds.length = 0;
  t.same(idsOf(await cache.find('proj', 'live', week)), await all(), 'the same slots again');
  t.same(finds, [], 'none read');

  // A conversation of the third hour ends: that hour is read again, alone.
  await end(record('late', T0 + 2 * HOUR + 30_000, 'parking late'));
  const third = new Date(T0 + 2 * HOUR).toISOString();
  const found = await cache.find('proj', 'live', week);
  t.ok(idsOf(found).includes('late'), 'the new vector is found');
  t.same(idsOf(found), await all());
  t.same(finds, [{ project_id: 'proj', environment: 'live', bucket: third }], 'only its hour was read');

  // A narrower range reads nothing either, and returns only its hours.
  finds.length = 0;
  const two = await cache.find('proj', 'live', { $gte: new Date(T0 + HOUR).toISOString(), $lt: new Date(T0 + 3 * HOUR).toISOString() });
  t.same(finds, []);
  t.same([...new Set(two.map((s) => s.bucket))].sort(), [new Date(T0 + HOUR).toISOString(), third]);

  // A rebuild: the read models are reset and fewer conversations replayed. Nothing kept from before is served.
  await projector.reset!(store);
  for (let i = 0; i < 250; i += 2) await end(record(`c${String(i).padStart(3, '0')}`, T0 + (i < 210 ? 0 : (1 + ((i - 210) % 4)) * HOUR) + i * 1000, `topic ${i % 7} parking`));
  const rebuilt = await all();
  t.equal(rebuilt.length, 125);
  t.same(idsOf(await cache.find('proj', 'live', week)), rebuilt, 'after a rebuild, the rebuilt slots');
});

t.test('the budget: least recently used hours out first; none kept with no budget', async (t) => {
  const store = await storeFor(t, 'sb-slot-cache-budget-');
  const projector = conversationsProjector({ embedder: createOfflineEmbedder() });
  for (let i = 0; i < 40; i++) await projector.apply([entryOfRecord(record(`c${i}`, T0 + (i % 4) * HOUR + i * 1000, 'parking'), i + 1)], store);
  const hours = conversationHours(store);
  const week = { $gte: new Date(T0).toISOString(), $lt: new Date(T0 + 4 * HOUR).toISOString() };
  const one = await conversationVectorBuckets(store).find({ project_id: 'proj', bucket: new Date(T0).toISOString() });
  const perHour = one.reduce((n: number, s: VectorSlot) => n + (s.block?.byteLength ?? 0) + 2 * (s.heads?.length ?? 0) + 256, 0);

  const small = counted(conversationVectorBuckets(store));
  const cache = new SlotCache(hours, small.collection, 'vectors', Math.floor(perHour * 2.5));
  await cache.find('proj', 'live', week);
  t.ok(cache.size <= perHour * 2.5, `within the budget: ${cache.size} of ${Math.floor(perHour * 2.5)}`);
  small.finds.length = 0;
  t.equal(idsOf(await cache.find('proj', 'live', week)).length, 40, 'every conversation still found');
  t.equal(small.finds.length, 1, 'the hours that did not fit read again (one run)');

  const none = counted(conversationVectorBuckets(store));
  const off = new SlotCache(hours, none.collection, 'vectors', 0);
  await off.find('proj', 'live', week);
  await off.find('proj', 'live', week);
  t.equal(none.finds.length, 2, 'no budget: every search reads its slots');
  t.equal(off.size, 0);
});

t.test('span slots the same way: an hour is read again after a conversation of it starts, and after it ends', async (t) => {
  const store = await storeFor(t, 'sb-slot-cache-spans-');
  const projector = conversationsProjector({ embedder: createOfflineEmbedder() });
  let seq = 0;
  for (let i = 0; i < 30; i++) await projector.apply([entryOfRecord(record(`c${i}`, T0 + (i % 3) * HOUR + i * 1000, 'parking'), ++seq)], store);
  const spans = conversationSpans(store);
  const { collection, finds } = counted(spans as unknown as Collection<VectorSlot>);
  const cache = new SlotCache(conversationHours(store), collection as unknown as Collection<SpanSlot>, 'spans', 64 * 1024 * 1024);
  const range = { $gte: new Date(T0).toISOString(), $lt: new Date(T0 + 3 * HOUR).toISOString() };
  const entries = async () => (await cache.find('proj', 'live', range)).flatMap((s) => spanEntries(s)).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  t.equal((await entries()).length, 30);
  finds.length = 0;
  t.equal((await entries()).length, 30);
  t.same(finds, [], 'kept');
  const late = record('late', T0 + HOUR + 50_000, 'parking');
  await projector.apply([entryOfRecord(Object.assign({}, late, { in_progress: true, ended_at: null }), ++seq)], store);
  t.same((await entries()).find((e) => e[0] === 'late')?.[2], null, 'the conversation that started is found, in progress');
  t.same(finds, [{ project_id: 'proj', environment: 'live', bucket: new Date(T0 + HOUR).toISOString() }], 'only its hour read');
  await projector.apply([entryOfRecord(late, ++seq, 2)], store);
  t.equal((await entries()).find((e) => e[0] === 'late')?.[2], Date.parse(late.ended_at!), 'and its end, once it ended');
});
