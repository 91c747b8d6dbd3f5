import t from 'tap';
import fc from 'fast-check';
import type { Store } from '../store/mod.js';
import { searchIndexer, type RecordFields } from '../actors/conversation/search.js';
import { createOfflineEmbedder } from '../actors/conversation/embedding.js';
import { sweep } from '../gateway/edge/conversations/concurrency.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';

let p: Platform;
let c: ChatProject;
let store: Store;
let get: ReturnType<typeof conversationsClient>;

const at = (hhmm: string) => `2026-01-05T${hhmm}:00.000Z`;

/** A conversation with known times, written by the projection's own code as the conversation actor would. */
function conversation(o: Partial<RecordFields> & { started_at: string }): RecordFields {
  return {
    project_id: c.agentId, environment: 'live', ended_at: null, in_progress: false, channel: 'CHAT', variant_id: '', variant_name: '',
    asr_lang_code: '', from_number: '', to_number: '', turns: [], ...o,
  };
}

t.before(async () => {
  ({ p, store } = await startPlatformWithStore());
  c = await chatProject(p, { name: 'Calls Co' });
  get = conversationsClient(p, c, await conversationsKey(p, c, []));
  const indexer = searchIndexer(store, createOfflineEmbedder());
  const rows: Array<[string, RecordFields]> = [
    ['c1', conversation({ started_at: at('10:01'), ended_at: at('10:07'), variant_id: 'v-lon', variant_name: 'London', asr_lang_code: 'en-GB' })],
    ['c2', conversation({ started_at: at('10:04'), ended_at: at('10:06'), variant_id: 'v-par', variant_name: 'Paris', asr_lang_code: 'fr-FR', from_number: '+441234567' })],
    // Starts the moment c1 ends: not concurrent with it.
    ['c3', conversation({ started_at: at('10:07'), ended_at: at('10:09'), variant_id: 'v-lon', variant_name: 'London', asr_lang_code: 'en-US' })],
    // Started before the range and goes on across two interval edges.
    ['c4', conversation({ started_at: at('09:50'), ended_at: at('10:12'), variant_id: 'v-par', variant_name: 'Paris', to_number: '+441234567' })],
    ['c5', conversation({ started_at: at('10:00'), ended_at: at('10:10'), environment: 'sandbox' })],
    // Still in progress: going on until now.
    ['c6', conversation({ started_at: at('10:11'), in_progress: true, variant_id: 'v-lon', variant_name: 'London' })],
    // Over before the range.
    ['c7', conversation({ started_at: at('09:00'), ended_at: at('09:30') })],
  ];
  for (const [id, fields] of rows) await indexer.project(id, fields, 1);
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

const series = (r: any) => r.body.intervals.map((i: any) => i.max_concurrent_conversations);
const range = { start_time: '2026-01-05T10:02:00Z', end_time: '2026-01-05T10:16:00Z' };

t.test('5-minute intervals: start rounded down, end rounded up, peak overlaps across edges', async (t) => {
  const r = await get(range, { version: 'v1', path: '/concurrency' });
  t.equal(r.status, 200, r.text);
  t.same(r.body, {
    account_id: c.accountId,
    project_id: c.agentId,
    intervals: [
      { time: at('10:00'), max_concurrent_conversations: 3 },
      { time: at('10:05'), max_concurrent_conversations: 3 },
      { time: at('10:10'), max_concurrent_conversations: 2 },
      { time: at('10:15'), max_concurrent_conversations: 1 },
    ],
  });
});

t.test('filters: client_env, variant, language, phone_number', async (t) => {
  const q = (extra: Record<string, string>) => get({ ...range, ...extra }, { version: 'v1', path: '/concurrency' });
  t.same(series(await q({ client_env: 'sandbox' })), [1, 1, 0, 0]);
  t.same(series(await q({ variant_id: 'v-par' })), [2, 2, 1, 0]);
  t.same(series(await q({ variant_name: 'London' })), [1, 1, 1, 1]);
  t.same(series(await q({ language: 'en' })), [1, 1, 0, 0], 'en matches en-GB and en-US');
  t.same(series(await q({ language: 'en-GB' })), [1, 1, 0, 0]);
  t.same(series(await q({ phone_number: '+441234567' })), [2, 2, 1, 0], 'caller or agent number');
});

t.test('slice_by=variant: one series per variant', async (t) => {
  const r = await get({ ...range, slice_by: 'variant' }, { version: 'v1', path: '/concurrency' });
  t.equal(r.status, 200, r.text);
  const of = (name: string) => r.body.intervals.filter((i: any) => i.variant_name === name);
  t.same(of('London').map((i: any) => i.max_concurrent_conversations), [1, 1, 1, 1]);
  t.same(of('Paris').map((i: any) => i.max_concurrent_conversations), [2, 2, 1, 0]);
  t.ok(of('Paris').every((i: any) => i.variant_id === 'v-par'));
  t.same(r.body.intervals.map((i: any) => i.time), [at('10:00'), at('10:00'), at('10:05'), at('10:05'), at('10:10'), at('10:10'), at('10:15'), at('10:15')], 'ascending');
});

t.test('errors', async (t) => {
  const q = (query: Record<string, string>, opts = {}) => get(query, { version: 'v1', path: '/concurrency', ...opts });
  for (const [query, status] of [
    [{}, 400],
    [{ start_time: range.start_time }, 400],
    [{ start_time: 'noon', end_time: range.end_time }, 400],
    [{ start_time: range.end_time, end_time: range.start_time }, 400],
    [{ start_time: '2026-01-01T00:00:00Z', end_time: '2026-01-08T00:00:01Z' }, 400],
    [{ ...range, slice_by: 'language' }, 501],
    [{ ...range, slice_by: 'phone_number' }, 501],
    [{ ...range, slice_by: 'channel' }, 400],
    [{ ...range, variant_id: 'a', variant_name: 'b' }, 400],
    [{ ...range, client_env: 'prod' }, 400],
  ] as Array<[Record<string, string>, number]>) {
    const r = await q(query);
    t.equal(r.status, status, JSON.stringify(query));
    t.type(r.body.error_message, 'string');
  }
  t.equal((await q({ start_time: '2026-01-01T00:00:00Z', end_time: '2026-01-08T00:00:00Z' })).status, 200, 'exactly one week');
  t.equal((await q(range, { key: null })).status, 401);
  t.equal((await q(range, { key: 'sbk_x_y' })).status, 401);
  t.equal((await q(range, { key: c.chatKey })).status, 403);
  t.equal((await q(range, { account: 'nobody' })).status, 404);
  t.equal((await q(range, { project: 'agent-nobody' })).status, 404);
  t.equal((await q(range, { version: 'v3' })).status, 404);
});

t.test('conversations started and closed through the Chat API', async (t) => {
  const now = Date.now();
  const closed = (await c.chat('create', {})).body.conversation_id;
  await c.chat('close', { conversation_id: closed });
  const range = { start_time: new Date(now - 600_000).toISOString(), end_time: new Date(now + 600_000).toISOString() };
  const q = () => get(range, { version: 'v1', path: '/concurrency' });
  t.equal(Math.max(...series(await q())), 1, 'the closed one counted once, over its own span');
  await c.chat('create', {});
  const during = (await c.chat('create', {})).body.conversation_id;
  await c.chat('close', { conversation_id: during });
  t.equal(Math.max(...series(await q())), 2, 'one closed while another is open: two at once');
});

t.test('sweep: the peak of each interval equals a brute-force count', async (t) => {
  const M = 60_000;
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 20 })), { maxLength: 25 }), (raw) => {
      const spans = raw.map(([s, d]) => [s * M, (s + d) * M] as [number, number]);
      const got = sweep(spans, 5 * M, 35 * M);
      const want: number[] = [];
      for (let t0 = 5 * M; t0 < 35 * M; t0 += 5 * M) {
        let max = 0;
        // Every instant that matters is a minute mark here (zero-length spans last 1 ms).
        for (let x = t0; x < t0 + 5 * M; x += M) {
          const n = spans.filter(([s, e]) => s <= x && x < Math.max(e, s + 1)).length;
          if (n > max) max = n;
        }
        want.push(max);
      }
      t.same(got, want);
    }),
    { numRuns: 200 },
  );
});
