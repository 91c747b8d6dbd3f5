import t from 'tap';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { http } from './helpers/http.js';
import { platformFor, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';

let p: Platform;
let c: ChatProject;
let get: ReturnType<typeof conversationsClient>;
let key: string;
let since: string;
const ids: Record<string, string> = {};
let variants: Record<string, string> = {};

const v3Fields = ['id', 'account_id', 'project_id', 'variant_id', 'variant_name', 'environment', 'started_at', 'channel', 'from_number', 'to_number', 'in_progress', 'num_turns', 'total_duration', 'polyai_duration', 'handoff', 'handoff_reason', 'handoff_destination', 'num_silences', 'num_ood', 'metrics', 'state', 'turns'];

t.before(async () => {
  p = await platformFor(t);
  c = await chatProject(p, { variants: ['London', 'Paris'] });
  key = await conversationsKey(p, c);
  get = conversationsClient(p, c, key);
  const listed = await c.api('GET', `/v1/agents/${c.agentId}/branches/main/variants`);
  variants = Object.fromEntries(listed.body.variants.map((v: any) => [v.name, v.id]));
  since = new Date(Date.now() - 1000).toISOString();
  const a = await c.chat('create', { channel: 'webchat', variant_id: variants.London });
  ids.a = a.body.conversation_id;
  await c.chat('respond', { conversation_id: ids.a, message: 'When are you opening on Monday?' });
  await c.chat('close', { conversation_id: ids.a });
  const b = await c.chat('create', { variant_id: variants.Paris });
  ids.b = b.body.conversation_id;
  await c.chat('respond', { conversation_id: ids.b, message: 'Is there somewhere to park the car?' });
  const d = await c.chat('create', { channel: 'sms', variant_id: variants.Paris, initial_message: 'My invoice looks wrong, the amount charged is too high' });
  ids.d = d.body.conversation_id;
});

t.test('v3 lists the project conversations in ascending order, in the contract shape', async (t) => {
  const r = await get({ start_time: since });
  t.equal(r.status, 200, r.text);
  t.same(r.body.conversations.map((x: any) => x.id), [ids.a, ids.b, ids.d]);
  t.equal(r.body.cursor, null, 'cursor null at the end');
  t.notOk('next_offset' in r.body, 'no next_offset without more results');
  const a = r.body.conversations[0];
  t.same(Object.keys(a).sort(), [...v3Fields, 'audio'].sort(), 'v3 rows: the contract fields and audio (docs/recordings.md)');
  t.same(a.audio, { available: false }, 'a text conversation has no audio (and no redactions field)');
  t.match(a, {
    account_id: c.accountId, project_id: c.agentId, variant_id: variants.London, variant_name: 'London', environment: 'live',
    channel: 'WEBCHAT', from_number: '', to_number: '', in_progress: false, num_turns: 2, handoff: false, handoff_reason: '', handoff_destination: '',
  });
  t.match(a.started_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  t.equal(a.turns[1].user_input, 'When are you opening on Monday?');
  t.equal(a.turns[0].user_input, '', 'the opening turn has an empty user_input, never null');
  t.notOk('latency' in a.turns[0], 'no latency unless include_latency');
  t.same(Object.keys(a.turns[0]).sort(), ['agent_response', 'agent_response_datetime', 'barge_in', 'english_agent_response', 'entities', 'intents', 'is_ood', 'is_silence', 'translated_user_input', 'user_input', 'user_input_datetime', 'user_input_dtmf'].sort());
  const withLatency = await get({ start_time: since, include_latency: 'true' });
  t.type(withLatency.body.conversations[0].turns[1].latency, 'number');
  t.equal(r.body.conversations[1].in_progress, true);
  t.equal(r.body.conversations[1].channel, 'CHAT');
  for (const row of r.body.conversations.slice(0, 2)) {
    t.same(row.metrics, { CALL_DURATION: String(row.total_duration), CALL_TURN: row.turns.map((x: any) => x.user_input_datetime) }, `an ${row.in_progress ? 'in-progress' : 'ended'} row's metrics: CALL_TURN holds its turns' times`);
  }
});

/** The paths of every null inside a value (`$.audio.redactions`, `$.turns[0].user_input`). */
function nullPaths(v: unknown, path = '$'): string[] {
  if (v === null) return [path];
  if (Array.isArray(v)) return v.flatMap((x, i) => nullPaths(x, `${path}[${i}]`));
  if (typeof v === 'object') return Object.entries(v as Record<string, unknown>).flatMap(([k, x]) => nullPaths(x, `${path}.${k}`));
  return [];
}

t.test('v3 rows hold no null anywhere (contract 2.5): ended and in-progress rows, with and without latency, a cursor page', async (t) => {
  const pages = [
    await get({ start_time: since }),
    await get({ start_time: since, include_latency: 'true' }),
    await get({ start_time: since, limit: '1' }),
  ];
  pages.push(await get({ start_time: since, limit: '1', cursor: pages[2].body.cursor }));
  const rows = pages.flatMap((r) => {
    t.equal(r.status, 200, r.text);
    return r.body.conversations as Array<{ id: string }>;
  });
  t.ok(rows.length >= 5, `${rows.length} rows walked`);
  t.ok(rows.some((r: any) => r.in_progress === false) && rows.some((r: any) => r.in_progress === true), 'ended and in-progress rows among them');
  for (const row of rows) t.same(nullPaths(row), [], `row ${row.id}: no null values`);
});

t.test('filters: channel (repeatable), client_env, variant, in_progress, time range', async (t) => {
  const idsOf = async (q: any) => {
    const r = await get({ start_time: since, ...q });
    t.equal(r.status, 200, r.text);
    return r.body.conversations.map((x: any) => x.id);
  };
  t.same(await idsOf({ channel: 'WEBCHAT' }), [ids.a]);
  t.same(await idsOf({ channel: ['WEBCHAT', 'SMS'] }), [ids.a, ids.d]);
  t.same(await idsOf({ channel: 'VOICE-SIP' }), []);
  t.same(await idsOf({ channel: ['webchat', 'Sms'] }), [ids.a, ids.d], 'in any letter case: as the Chat API names them');
  t.same(await idsOf({ client_env: 'sandbox' }), []);
  t.same(await idsOf({ client_env: 'live' }), [ids.a, ids.b, ids.d]);
  t.same(await idsOf({ variant_id: variants.Paris }), [ids.b, ids.d]);
  t.same(await idsOf({ variant_name: 'London' }), [ids.a]);
  t.same(await idsOf({ in_progress: 'true' }), [ids.b, ids.d]);
  t.same(await idsOf({ in_progress: 'false' }), [ids.a]);
  const all = (await get({ start_time: since })).body.conversations;
  t.same(await idsOf({ end_time: all[1].started_at }), [ids.a], 'end_time is exclusive');
  t.same(await idsOf({ start_time: all[1].started_at }), [ids.b, ids.d], 'start_time is inclusive');
  t.same(await idsOf({ start_time: new Date(Date.now() + 3_600_000).toISOString() }), []);
  const both = await get({ variant_id: variants.Paris, variant_name: 'Paris' });
  t.equal(both.status, 400);
  t.match(both.body, { error_message: /only one of variant_id and variant_name/ });
});

t.test('offset pagination and cursor pagination', async (t) => {
  const first = await get({ start_time: since, limit: '2' });
  t.same(first.body.conversations.map((x: any) => x.id), [ids.a, ids.b]);
  t.equal(first.body.next_offset, 2);
  t.type(first.body.cursor, 'string');
  t.match(first.body.cursor, /^[A-Za-z0-9_.-]+$/, 'URL-safe');
  const second = await get({ start_time: since, limit: '2', offset: '2' });
  t.same(second.body.conversations.map((x: any) => x.id), [ids.d]);
  t.notOk('next_offset' in second.body);
  const byCursor = await get({ start_time: since, limit: '2', cursor: first.body.cursor, offset: '0' });
  t.same(byCursor.body.conversations.map((x: any) => x.id), [ids.d], 'cursor wins over offset');
  t.equal(byCursor.body.cursor, null);
  t.notOk('next_offset' in byCursor.body, 'the last page, by cursor: no next_offset');
  const one = await get({ start_time: since, limit: '1' });
  const secondByCursor = await get({ start_time: since, limit: '1', cursor: one.body.cursor });
  t.same(secondByCursor.body.conversations.map((x: any) => x.id), [ids.b]);
  t.equal(secondByCursor.body.next_offset, 2, 'a page by cursor with more after it has next_offset (contract 2.5), the offset of the page after it');
  t.same((await get({ start_time: since, limit: '1', offset: String(secondByCursor.body.next_offset) })).body.conversations.map((x: any) => x.id), [ids.d], 'which offset pagination reads on from');
  const thirdByCursor = await get({ start_time: since, limit: '1', cursor: secondByCursor.body.cursor });
  t.same(thirdByCursor.body.conversations.map((x: any) => x.id), [ids.d]);
  t.notOk('next_offset' in thirdByCursor.body);
  const otherFilters = await get({ start_time: since, limit: '2', cursor: first.body.cursor, channel: 'WEBCHAT' });
  t.equal(otherFilters.status, 400, 'a cursor for other filters');
  t.match(otherFilters.body, { error_message: String });
  for (const bad of ['x', 'not-a-cursor.AAAAAAAAAAAAAAAAAAAAAA', `${first.body.cursor}x`, first.body.cursor.replace(/^./, (ch: string) => (ch === 'A' ? 'B' : 'A'))]) {
    const r = await get({ start_time: since, cursor: bad });
    t.equal(r.status, 400, `malformed cursor ${bad}`);
    t.match(r.body, { error_message: /cursor/ });
  }
  t.equal((await get({ limit: '0' })).status, 400);
  t.equal((await get({ limit: '1001' })).status, 400, 'v3 limit is 1 to 1000');
  t.equal((await get({ offset: '-1' })).status, 400);
});

t.test('a cursor walk has no duplicates and no gaps while conversations are written', async (t) => {
  const other = await chatProject(p, { name: 'Walk Co' });
  const walkKey = await conversationsKey(p, other);
  const walkGet = conversationsClient(p, other, walkKey);
  const from = new Date(Date.now() - 1000).toISOString();
  const before: string[] = [];
  for (let i = 0; i < 9; i++) before.push((await other.chat('create', { channel: 'api' })).body.conversation_id);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const r: any = await walkGet({ start_time: from, limit: '2', ...(cursor ? { cursor } : {}) });
    t.equal(r.status, 200, r.text);
    seen.push(...r.body.conversations.map((x: any) => x.id));
    cursor = r.body.cursor;
    // Concurrent writes: a new conversation after every page.
    if (pages++ < 3) await other.chat('create', { channel: 'api' });
  } while (cursor);
  t.equal(new Set(seen).size, seen.length, 'no duplicates');
  for (const id of before) t.ok(seen.includes(id), `no gap: ${id}`);
  t.same(seen.slice(0, 9), before, 'in order');
  t.notOk(seen.some((id) => Object.values(ids).includes(id)), "another project's conversations never show");
  t.notOk((await get({ start_time: from })).body.conversations.some((x: any) => before.includes(x.id)), 'nor the other way round');
});

t.test('transcript results paginate by cursor', async (t) => {
  const range = { start_time: since, end_time: new Date(Date.now() + 60_000).toISOString(), query_type: 'transcript', query: 'welcome', turn_type: 'agent', limit: '1' };
  const seen: string[] = [];
  let cursor: string | null = null;
  do {
    const r: any = await get({ ...range, ...(cursor ? { cursor } : {}) });
    t.equal(r.status, 200, r.text);
    seen.push(...r.body.conversations.map((x: any) => x.id));
    cursor = r.body.cursor;
  } while (cursor && seen.length < 20);
  t.same(seen, [ids.a, ids.b, ids.d], 'every greeting, once, in order');
  const first = await get(range);
  t.equal((await get({ ...range, query: 'hello', cursor: first.body.cursor })).status, 400, 'a cursor of another query');
});

t.test('v1: legacy shape with descriptions, limit default 5, no v3-only parameters', async (t) => {
  const r = await get({ start_time: since }, { version: 'v1' });
  t.equal(r.status, 200, r.text);
  t.same(Object.keys(r.body).sort(), ['conversations', 'descriptions', 'next_offset']);
  t.equal(r.body.next_offset, null);
  t.type(r.body.descriptions.conversations.num_turns, 'string');
  const a = r.body.conversations[0];
  t.equal(a.from_number, null, 'legacy: empty text is null');
  t.notOk('translated_user_input' in a.turns[0]);
  const limited = await get({ start_time: since, limit: '1' }, { version: 'v1' });
  t.equal(limited.body.next_offset, 1);
  t.equal((await get({ limit: '5000' }, { version: 'v1' })).status, 200, 'v1 limit up to 5000');
  t.equal((await get({ limit: '5001' }, { version: 'v1' })).status, 400);
  for (const q of [{ cursor: 'abc' }, { query_type: 'transcript', query: 'x' }, { sample: 'random' }, { include_latency: 'true' }] as Array<Record<string, string>>) {
    t.equal((await get(q, { version: 'v1' })).status, 400, JSON.stringify(q));
  }
  const v2 = await get({ start_time: since }, { version: 'v2' });
  t.equal(v2.status, 200);
  t.same(Object.keys(v2.body.conversations[0]).sort(), [...v3Fields].sort(), 'v2 has the v3 shape');
  t.equal((await get({ start_time: since }, { version: 'v4' })).status, 404);
});

t.test('keys: 401, 403, 404', async (t) => {
  t.equal((await get({}, { key: null })).status, 401);
  const invalid = await get({}, { key: 'sbk_nope_nope' });
  t.equal(invalid.status, 401);
  t.match(invalid.body, { error_message: String });
  t.equal((await get({}, { key: c.chatKey })).status, 403, 'a chat key');
  const noData = await conversationsKey(p, c, []);
  const r = await get({}, { key: noData });
  t.equal(r.status, 403, 'without conversations_data');
  t.match(r.body, { error_message: /conversations_data/ });
  const other = await chatProject(p, { name: 'Other Co' });
  const otherKey = await conversationsKey(p, other);
  t.equal((await get({}, { key: otherKey })).status, 403, "another account's key");
  t.equal((await get({}, { account: 'acc_unknown' })).status, 404);
  t.equal((await get({}, { project: 'agent-unknown' })).status, 404);
  const slugs = await get({ start_time: since }, { account: c.accountSlug, project: c.agentSlug });
  t.equal(slugs.status, 200, 'account and project by slug');
  t.equal(slugs.body.conversations.length, 3);
  const concurrency = await get({ start_time: since, end_time: new Date(Date.now() + 60_000).toISOString() }, { key: noData, path: '/concurrency', version: 'v1' });
  t.equal(concurrency.status, 200, 'concurrency needs no conversations_data permission');
  t.equal((await get({}, { key: null, path: '/concurrency', version: 'v1' })).status, 401, 'authentication comes before parameters');
});

t.test('show_transcripts off: turns empty, num_turns true; chunked streaming', async (t) => {
  const a = admin(p);
  await a('PATCH', `/projects/${c.agentId}/settings`, { show_transcripts: false });
  const hidden = await get({ start_time: since, include_latency: 'true' });
  t.same(hidden.body.conversations[0].turns, []);
  t.equal(hidden.body.conversations[0].num_turns, 2);
  t.same(hidden.body.conversations.map((x: any) => x.metrics.CALL_TURN.length), hidden.body.conversations.map((x: any) => x.num_turns), 'CALL_TURN lists every turn, transcripts hidden or not');
  const end = new Date(Date.now() + 60_000).toISOString();
  for (const query_type of ['transcript', 'semantic']) {
    const search = await get({ start_time: since, end_time: end, query_type, query: 'hello' });
    t.equal(search.status, 403, `${query_type} search would tell what the hidden transcripts hold`);
    t.match(search.body, { error_message: /show_transcripts/ });
  }
  await a('PATCH', `/projects/${c.agentId}/settings`, { show_transcripts: true, chunked_streaming: true });
  t.equal((await get({ start_time: since, end_time: end, query_type: 'transcript', query: 'hello' })).status, 200, 'shown again: search works');
  const plain = await get({ start_time: since, limit: '2' }, { version: 'v1' });
  t.not(plain.headers.get('transfer-encoding'), 'chunked', 'never on v1');
  for (const version of ['v2', 'v3']) {
    const r = await get({ start_time: since, limit: '2' }, { version });
    t.equal(r.status, 200);
    t.equal(r.headers.get('transfer-encoding'), 'chunked', version);
    t.same(r.body.conversations.map((x: any) => x.id), [ids.a, ids.b]);
    t.equal(r.body.next_offset, 2);
    const next = await get({ start_time: since, limit: '2', cursor: r.body.cursor }, { version });
    t.same(next.body.conversations.map((x: any) => x.id), [ids.d]);
    t.equal(next.body.cursor, null);
  }
  const empty = await get({ start_time: new Date(Date.now() + 3_600_000).toISOString() });
  t.same(empty.body, { conversations: [], cursor: null });
  await a('PATCH', `/projects/${c.agentId}/settings`, { chunked_streaming: false });
  t.not((await get({ start_time: since })).headers.get('transfer-encoding'), 'chunked');
});

t.test('retrieval modes: transcript, semantic, random', async (t) => {
  const range = { start_time: since, end_time: new Date(Date.now() + 60_000).toISOString() };
  const search = async (q: any) => {
    const r = await get({ ...range, ...q });
    t.equal(r.status, 200, r.text);
    return r.body.conversations.map((x: any) => x.id);
  };
  t.same(await search({ query_type: 'transcript', query: 'parking' }), [ids.b], 'stemmed: park/parking');
  t.same(await search({ query_type: 'transcript', query: 'invoice amount' }), [ids.d], 'every term');
  t.same(await search({ query_type: 'transcript', query: 'invoice opening' }), []);
  t.same(await search({ query_type: 'transcript', query: 'Monday', turn_type: 'user' }), [ids.a]);
  // The agent answered the opening-hours question with "... Monday to Friday".
  t.same(await search({ query_type: 'transcript', query: 'Friday', turn_type: 'user' }), []);
  t.same(await search({ query_type: 'transcript', query: 'Friday', turn_type: 'agent' }), [ids.a]);
  t.same(await search({ query_type: 'transcript', query: 'Friday', channel: 'CHAT' }), []);
  const semantic = await search({ query_type: 'semantic', query: 'where can I park my car' });
  t.equal(semantic[0], ids.b, 'most similar first');
  const billing = await search({ query_type: 'semantic', query: 'wrong invoice amount charged' });
  t.equal(billing[0], ids.d);
  const paged = await get({ ...range, query_type: 'semantic', query: 'open Monday park car invoice', limit: '1' });
  t.equal(paged.body.conversations.length, 1);
  if (paged.body.cursor) {
    const next = await get({ ...range, query_type: 'semantic', query: 'open Monday park car invoice', limit: '1', cursor: paged.body.cursor });
    t.equal(next.status, 200);
    t.not(next.body.conversations[0]?.id, paged.body.conversations[0].id, 'the next rank');
  }
  t.same(await search({ sample: 'random', in_progress: 'false' }), [ids.a], 'a closed conversation: its ended span replaces its start');
  t.same(await search({ sample: 'random', in_progress: 'true' }), [ids.b, ids.d]);
  const sample = await search({ sample: 'random', limit: '2' });
  t.equal(sample.length, 2);
  t.ok(sample.every((id: string) => Object.values(ids).includes(id)));
  t.equal((await get({ sample: 'random' })).status, 400, 'a time range is required');
  t.equal((await get({ ...range, sample: 'random', query_type: 'semantic', query: 'x' })).status, 400, 'one mode at most');
  t.equal((await get({ ...range, query_type: 'transcript' })).status, 400, 'query required');
  t.equal((await get({ ...range, query_type: 'bm25', query: 'x' })).status, 400);
  t.equal((await get({ ...range, query_type: 'semantic', query: 'x' }, { version: 'v2' })).status, 400, 'v3 only');
});

t.test('errors are never 500 and always {error_message}', async (t) => {
  const r = await http(p.edge, 'GET', `/v3/${c.accountId}/${c.agentId}/conversations?start_time=yesterday`, { headers: { 'x-api-key': key } });
  t.equal(r.status, 400);
  t.match(r.body, { error_message: /start_time/ });
  t.equal((await get({ start_time: '2026-02-31T00:00:00Z' })).status, 400, 'not a calendar date');
  t.equal((await get({ start_time: since, end_time: since })).status, 400);
  t.equal((await get({ in_progress: 'maybe' })).status, 400);
  t.equal((await get({ client_env: 'prod' })).status, 400);
  t.equal((await get('limit=1&limit=2')).status, 400, 'a single-valued parameter twice');
  // Lengths count characters, as the messages say: an emoji is one, not two UTF-16 units.
  const range = { start_time: since, end_time: new Date(Date.now() + 60_000).toISOString() };
  t.equal((await get({ ...range, query_type: 'transcript', query: '😀'.repeat(1000) })).status, 200, '1,000 emoji are a query of 1,000 characters');
  const long = await get({ ...range, query_type: 'transcript', query: '😀'.repeat(1001) });
  t.equal(long.status, 400);
  t.equal(long.body.error_message, 'query is longer than 1000 characters');
  t.equal((await get({ channel: '😀'.repeat(64) })).status, 200, 'a channel of 64 characters');
  t.equal((await get({ channel: '😀'.repeat(65) })).status, 400);
});
