/**
 * Concurrent Calls count voice calls (VOICE-SIP conversations) like any other, and the `phone_number` filter
 * finds a call by its caller or callee number however the number is written in the query: E.164 with its
 * `+` percent-encoded, with the `+` left raw (a query string reads it as a space), or spaced and dashed.
 */
import t from 'tap';
import type { Store } from '../store/mod.js';
import { searchIndexer, type RecordFields } from '../actors/conversation/search.js';
import { createOfflineEmbedder } from '../actors/conversation/embedding.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsKey } from './helpers/conversations.js';
import { http } from './helpers/http.js';
import { removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';

let p: Platform;
let c: ChatProject;
let store: Store;
let key: string;

const at = (hhmm: string) => `2026-01-05T${hhmm}:00.000Z`;
const call = (o: Partial<RecordFields> & { started_at: string }): RecordFields => ({
  project_id: c.agentId, environment: 'live', ended_at: null, in_progress: false, channel: 'VOICE-SIP', variant_id: '', variant_name: '',
  asr_lang_code: '', from_number: '', to_number: '', turns: [], ...o,
});

t.before(async () => {
  ({ p, store } = await startPlatformWithStore());
  c = await chatProject(p, { name: 'Voice Co' });
  key = await conversationsKey(p, c, []);
  const indexer = searchIndexer(store, createOfflineEmbedder());
  // Two inbound calls to the agent's number and one outbound call from it, all three going on at 10:03.
  await indexer.project('v1', call({ started_at: at('10:01'), ended_at: at('10:06'), from_number: '+14155550123', to_number: '+14155550100' }), 1);
  await indexer.project('v2', call({ started_at: at('10:03'), ended_at: at('10:08'), from_number: '+442079460018', to_number: '+14155550100' }), 1);
  await indexer.project('v3', call({ started_at: at('10:02'), ended_at: at('10:04'), from_number: '+14155550100', to_number: '+14155550124' }), 1);
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

const query = (rawQuery: string) =>
  http(p.edge, 'GET', `/v1/${c.accountId}/${c.agentId}/conversations/concurrency?start_time=2026-01-05T10:00:00Z&end_time=2026-01-05T10:10:00Z${rawQuery}`, { headers: { 'x-api-key': key } });
const series = (r: any) => r.body.intervals.map((i: any) => i.max_concurrent_conversations);

t.test('voice calls count', async (t) => {
  const r = await query('');
  t.equal(r.status, 200, r.text);
  t.same(series(r), [3, 2]);
});

t.test('phone_number: E.164 encoded, with a raw +, or written with spaces and dashes', async (t) => {
  t.same(series(await query('&phone_number=%2B14155550100')), [3, 2], 'the agent’s number: every call');
  t.same(series(await query('&phone_number=+14155550100')), [3, 2], 'a raw + reads as a space and still matches');
  t.same(series(await query('&phone_number=%2B1%20415-555-0100')), [3, 2], 'spaces and dashes');
  t.same(series(await query('&phone_number=%2B442079460018')), [1, 1], 'one caller');
  t.same(series(await query('&phone_number=+442079460018')), [1, 1]);
  t.same(series(await query('&phone_number=%2B14155550124')), [1, 0], 'the outbound call’s callee');
  t.same(series(await query('&phone_number=%2B19999999999')), [0, 0], 'nobody');
  t.same(series(await query('&phone_number=unknown')), [0, 0], 'not a number: compared as given');
});
