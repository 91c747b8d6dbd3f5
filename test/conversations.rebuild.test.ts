/**
 * A rebuilt projection equals the live one: conversations driven through the Chat API are projected live;
 * then `POST /admin/v1/runtime/projections/conversations/rebuild` drops the read models and replays the
 * journal, and every Conversations API answer (pages in v3 and v1 with latency: records and documents;
 * transcript search: postings; semantic search: vectors; concurrency: spans; a key without `pii`: the marked
 * values that mask its rows and searches) is the same as before. And
 * the embedded store's read-models file, removed while the platform is stopped, is rebuilt at the next start.
 */
import t from 'tap';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { chatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { http } from './helpers/http.js';
import { platformFor, removeDir, startPlatform } from './helpers/platform.js';
import { waitForProjections } from './helpers/projections.js';

t.test('conversations: a projection rebuilt from the journal gives the same Conversations API answers as the live one', async (t) => {
  const p = await platformFor(t);
  // A function marks member codes personal: a key without `pii` reads them masked, from the marks projected with the turns.
  const c = await chatProject(p, { functions: { turn: `function turn(conv, message) { const m = /member code (\\w+)/.exec(message); if (m) conv.mark_pii(m[1]); return 'noted'; }` } });
  const get = conversationsClient(p, c, await conversationsKey(p, c, ['conversations_data', 'pii']));
  const masked = conversationsClient(p, c, await conversationsKey(p, c));
  const since = new Date(Date.now() - 60_000).toISOString();
  const until = new Date(Date.now() + 3_600_000).toISOString();
  const messages = ['When are you opening on Monday?', 'Is there somewhere to park the car?', 'My member code Zq81Wx for parking', 'My invoice is wrong'];
  for (let i = 0; i < 6; i++) {
    const created = await c.chat('create', { channel: i % 2 ? 'sms' : 'webchat' });
    t.equal(created.status, 200, created.text);
    const id = created.body.conversation_id;
    for (const m of messages.slice(0, 1 + (i % messages.length))) t.equal((await c.chat('respond', { conversation_id: id, message: m })).status, 200);
    if (i % 3 !== 2) await c.chat('close', { conversation_id: id });
  }
  const ok = async (r: Promise<{ status: number; text: string; body: any }>) => {
    const res = await r;
    if (res.status !== 200) throw new Error(`${res.status} ${res.text}`);
    return res.body;
  };
  const range = { start_time: since, end_time: until };
  const answers = async () => ({
    v3: await ok(get(range)),
    v1: await ok(get({ ...range, limit: '100' }, { version: 'v1' })),
    latency: await ok(get({ ...range, include_latency: 'true' })),
    transcript: await ok(get({ ...range, query_type: 'transcript', query: 'park' })),
    semantic: await ok(get({ ...range, query_type: 'semantic', query: 'parking the car' })),
    concurrency: await ok(get(range, { version: 'v1', path: '/concurrency' })),
    masked: await ok(masked(range)),
    maskedTranscript: await ok(masked({ ...range, query_type: 'transcript', query: 'park' })),
    maskedValue: await ok(masked({ ...range, query_type: 'transcript', query: 'Zq81Wx' })),
    maskedSemantic: await ok(masked({ ...range, query_type: 'semantic', query: 'parking the car' })),
  });
  const live = await answers();
  t.equal(live.v3.conversations.length, 6, 'every conversation listed');
  t.equal(live.v3.conversations.filter((x: any) => !x.in_progress).length, 4, 'four ended');
  t.same(live.v3.conversations.map((x: any) => x.num_turns).sort(), [2, 2, 3, 3, 4, 5], 'every turn recorded');
  t.ok(live.transcript.conversations.length > 0, 'found by transcript search');
  t.ok(live.concurrency.intervals.some((x: any) => x.max_concurrent_conversations > 0), 'concurrency counted');
  t.match(JSON.stringify(live.v3), 'Zq81Wx', 'a key with pii reads the marked value');
  t.notMatch(JSON.stringify(live.masked), 'Zq81Wx', 'a key without pii does not');
  t.equal(live.masked.conversations.flatMap((x: any) => x.turns).filter((x: any) => x.user_input === '[redacted]').length, 2, 'it reads the two turns that said it masked');
  t.same(live.maskedValue.conversations, [], 'nor finds them by it');

  const rebuilt = await http(p.edge, 'POST', '/admin/v1/runtime/projections/conversations/rebuild', { headers: { authorization: `Bearer ${p.operatorToken}` } });
  t.equal(rebuilt.status, 202, rebuilt.text);
  await waitForProjections(p);
  t.same(await answers(), live, 'the same records, documents, postings, vectors and spans');
});

t.test('read-models.mdb removed while the platform is stopped: the next start rebuilds every read model from the journal', async (t) => {
  const p = await startPlatform();
  let again: Awaited<ReturnType<typeof startPlatform>> | null = null;
  t.teardown(async () => {
    await p.stop();
    await again?.stop();
    removeDir(p.dataDir);
  });
  const c = await chatProject(p);
  const key = await conversationsKey(p, c);
  for (const [i, m] of ['Is there somewhere to park the car?', 'When are you opening on Monday?'].entries()) {
    const id = (await c.chat('create', { channel: 'webchat' })).body.conversation_id;
    t.equal((await c.chat('respond', { conversation_id: id, message: m })).status, 200);
    if (i === 0) await c.chat('close', { conversation_id: id });
  }
  const range = { start_time: new Date(Date.now() - 60_000).toISOString(), end_time: new Date(Date.now() + 3_600_000).toISOString() };
  const answers = async (get: ReturnType<typeof conversationsClient>) => ({
    v3: (await get(range)).body,
    transcript: (await get({ ...range, query_type: 'transcript', query: 'park' })).body,
    concurrency: (await get(range, { version: 'v1', path: '/concurrency' })).body,
  });
  const asked = Date.now();
  // The second conversation is still in progress, so it counts in every interval up to now: an interval that
  // began after the first answers (the run crossed a 5-minute boundary) differs for that reason alone.
  const until = (a: Awaited<ReturnType<typeof answers>>) => ({
    ...a,
    concurrency: { ...a.concurrency, intervals: a.concurrency.intervals.filter((i: { time: string }) => Date.parse(i.time) <= asked) },
  });
  const before = until(await answers(conversationsClient(p, c, key)));
  t.equal(before.v3.conversations.length, 2, 'both conversations listed');
  t.equal(before.transcript.conversations.length, 1, 'found by transcript search');
  await p.stop();
  t.ok(existsSync(join(p.dataDir, 'read-models.mdb')), 'the read models were in their own file');
  for (const file of ['read-models.mdb', 'read-models.mdb-lock']) rmSync(join(p.dataDir, file), { force: true });
  t.ok(existsSync(join(p.dataDir, 'store.mdb')), 'the journal and every other record stay');
  again = await startPlatform({ dataDir: p.dataDir, env: { OPERATOR_TOKEN: p.operatorToken } });
  t.same(until(await answers(conversationsClient(again, c, key))), before, 'the same Conversations API answers after the rebuild');
});
