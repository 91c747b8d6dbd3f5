/**
 * The External Events API (contract 4.8) and the bridge-ended notification (4.9), over HTTP against a started
 * platform: a project function waits with `conv.await_external_event`, the webhook delivers (every id location,
 * every content type), the project's `external_event` function runs and the agent continues (chat: on the next
 * respond; webchat: at once as an agent message). Early events, duplicates, timeouts, every error row, tenant
 * isolation and refused XML entities; bridge-ended runs `bridge_ended` and shows in the record. A wait is a second
 * at least, a chain of waits renewed by their own timeouts stops, and what waits unread is bounded; a close, a
 * respond or a bridge notification that comes while `external_event` runs is taken once it is done.
 */
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { request } from 'node:http';
import type { Store } from '../store/mod.js';
import { conversationRecords, externalWaitRecords } from '../actors/conversation/mod.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey, toQuery } from './helpers/conversations.js';
import { http, type Res } from './helpers/http.js';
import { connect, is, messagingProject, T, type MessagingProject } from './helpers/messaging.js';
import { waitForProjections } from './helpers/projections.js';
import { removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';
import { externalKey, FUNCTIONS, webhook, type Hook } from './helpers/external-events.js';
import { MAX_TIMEOUT_ROUNDS, MAX_UNREAD_CHARS, UNREAD_DROPPED } from '../machines/conversation.js';

let p: Platform;
let c: ChatProject;
let other: ChatProject;
let key: string;
let otherKey: string;
let store: Store;
let records: ReturnType<typeof conversationRecords>;

t.before(async () => {
  ({ p, store } = await startPlatformWithStore({ env: { FUNCTION_TIMEOUT_MS: '2000', EXTERNAL_EVENT_MAX_BYTES: '4096' } }));
  c = await chatProject(p, { name: 'Pay Co', functions: FUNCTIONS });
  other = await chatProject(p, { name: 'Other Co', functions: FUNCTIONS });
  key = await externalKey(p, c);
  otherKey = await externalKey(p, other);
  records = conversationRecords(store);
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

const hook = (h: Hook = {}) => webhook(p.edge, h.project ?? c, h.key === undefined ? key : h.key, h);

/** A conversation of `c` that waits for `eventId`. */
async function waiting(t: Test, eventId: string, timeoutMs?: number, proj = c): Promise<string> {
  const created = await proj.chat('create', {});
  t.equal(created.status, 200, created.text);
  const id = created.body.conversation_id;
  const r = await proj.chat('respond', { conversation_id: id, message: `wait:${eventId}${timeoutMs ? `:${timeoutMs}` : ''}` });
  t.equal(r.body.response, `Waiting for ${eventId}`, 'the function answered and waits');
  return id;
}

/** The stored record of a conversation (as the test reads it from the data dir). */
const rec = async (id: string): Promise<any> => {
  await waitForProjections(p);
  return records.get(id);
};

/** Polls the record until `pred` holds. */
async function recordUntil(id: string, pred: (r: any) => boolean, what: string, ms = 15_000): Promise<any> {
  const until = Date.now() + ms;
  for (;;) {
    const r = await rec(id);
    if (r && pred(r)) return r;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(r?.state)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

t.test('chat: a conversation waits, the event arrives, the function runs and the next respond shows what it said', async (t) => {
  const id = await waiting(t, 'pay-1');
  const before = await rec(id);
  t.match(before!.state.awaiting_external_event, { event_id: 'pay-1', deadline: String }, 'the wait is in the record state');
  t.ok(Date.parse(before!.state.awaiting_external_event.deadline) > Date.now() + 30 * 60_000, 'default wait: an hour');
  const r = await hook({ query: { event_id_path: 'payment.ref' }, raw: JSON.stringify({ payment: { ref: 'pay-1', amount: 42 } }) });
  t.equal(r.status, 201, r.text);
  t.match(r.body, { id: /^xev_/, event_id: 'pay-1', content_type: 'application/json', conversation_id: id, status: 'delivered', duplicate: false });
  const after = await rec(id);
  t.notOk('awaiting_external_event' in after!.state, 'no longer waiting');
  t.same(after!.state.events, [{ id: 'pay-1', timed_out: false, content_type: 'application/json', body: JSON.stringify({ payment: { ref: 'pay-1', amount: 42 } }), data: { payment: { ref: 'pay-1', amount: 42 } } }]);
  const next = await c.chat('respond', { conversation_id: id, message: 'When are you open?' });
  t.equal(next.status, 200);
  t.match(next.body.response, /^Event pay-1 arrived We are open/, 'what the function said comes first');
  const again = await c.chat('respond', { conversation_id: id, message: 'When are you open?' });
  t.notMatch(again.body.response, /Event pay-1/, 'said once');
});

t.test('a Chat API conversation labelled webchat has no session: what was said comes with the next respond', async (t) => {
  const id = (await c.chat('create', { channel: 'webchat' })).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: id, message: 'wait:label-1' })).body.response, 'Waiting for label-1');
  t.equal((await hook({ raw: '{"id":"label-1"}' })).body.status, 'delivered');
  const next = await c.chat('respond', { conversation_id: id, message: 'When are you open?' });
  t.match(next.body.response, /^Event label-1 arrived/);
  t.equal(await store.snapshots.get(`session/${id}`), null, 'no session actor was brought to life');
});

t.test('every id location, with nested paths, and every content type', async (t) => {
  const cases: Array<[string, Hook, unknown]> = [
    ['headers', { query: { event_id_location: 'headers', event_id_path: 'X-Payment-Ref' }, headers: { 'x-payment-ref': 'loc-h' }, raw: '{"a":1}' }, { a: 1 }],
    ['querystring', { query: { event_id_location: 'querystring', event_id_path: 'ref', ref: 'loc-q' }, raw: '' }, null],
    ['querystring (dotted name)', { query: { event_id_location: 'querystring', event_id_path: 'order.ref', 'order.ref': 'loc-qd' }, type: 'text/plain', raw: 'hello' }, null],
    ['json (array index)', { query: { event_id_path: 'data.items.1.id' }, raw: JSON.stringify({ data: { items: [{ id: 'x' }, { id: 'loc-j' }] } }) }, { data: { items: [{ id: 'x' }, { id: 'loc-j' }] } }],
    ['json (number id)', { query: { event_id_path: 'order.number' }, raw: JSON.stringify({ order: { number: 90210 } }) }, { order: { number: 90210 } }],
    ['form', { query: { event_id_path: 'payment.ref' }, type: 'application/x-www-form-urlencoded', raw: 'payment.ref=loc-f&amount=5&tag=a&tag=b' }, { 'payment.ref': 'loc-f', amount: '5', tag: ['a', 'b'] }],
    ['xml', { query: { event_id_path: 'payment.ref' }, type: 'application/xml; charset=utf-8', raw: '<?xml version="1.0"?><payment status="ok"><ref>loc-x</ref><amount>5</amount></payment>' }, { payment: { '@status': 'ok', ref: 'loc-x', amount: '5' } }],
    ['xml attribute', { query: { event_id_path: 'payment.@id' }, type: 'application/xml', raw: '<payment id="loc-xa"><amount>5</amount></payment>' }, { payment: { '@id': 'loc-xa', amount: '5' } }],
    ['text/plain', { query: { event_id_path: 'body' }, type: 'text/plain', raw: '  loc-t\n' }, null],
  ];
  const ids: Record<string, string> = { headers: 'loc-h', querystring: 'loc-q', 'querystring (dotted name)': 'loc-qd', 'json (array index)': 'loc-j', 'json (number id)': '90210', form: 'loc-f', xml: 'loc-x', 'xml attribute': 'loc-xa', 'text/plain': 'loc-t' };
  for (const [what, h, data] of cases) {
    const id = await waiting(t, ids[what]);
    const r = await hook(h);
    t.equal(r.status, 201, `${what}: ${r.text}`);
    t.match(r.body, { event_id: ids[what], status: 'delivered', conversation_id: id }, what);
    const stored = await rec(id);
    t.same(stored.state.events?.[0]?.data, data, `${what}: data as parsed (null for plain text and no body)`);
    t.equal(stored.state.events?.[0]?.body, h.raw, `${what}: body stored as it came`);
  }
});

t.test('an id header sent twice is its first value, not the values joined', async (t) => {
  const id = await waiting(t, 'rep-a');
  const query = toQuery({ event_id_location: 'headers', event_id_path: 'X-Ref', account_id: c.accountId, project_id: c.agentId });
  // fetch joins repeated headers itself: node:http sends the raw pairs as given (and so no Host of its own).
  const r = await new Promise<{ status: number; body: any }>((resolve, reject) => {
    const url = new URL(`/v1/external-events/webhook?${query}`, p.edge);
    const req = request(url, { method: 'POST', headers: ['host', url.host, 'x-api-key', key, 'content-type', 'application/json', 'X-Ref', 'rep-a', 'X-Ref', 'rep-b'] }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d)).on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('error', reject).end('{}');
  });
  t.equal(r.status, 201, JSON.stringify(r.body));
  t.match(r.body, { event_id: 'rep-a', status: 'delivered', conversation_id: id });
});

t.test('an early event is handled within the step that starts the wait: the very next respond has its words', async (t) => {
  const r = await hook({ raw: JSON.stringify({ id: 'early-next', action: 'none' }) });
  t.match(r.body, { event_id: 'early-next', status: 'queued' });
  const id = await waiting(t, 'early-next');
  // No pause: the client's next message right after the one that started the wait.
  const next = await c.chat('respond', { conversation_id: id, message: 'When are you open?' });
  t.match(next.body.response, /^Event early-next arrived/);
});

t.test('an event that arrives before anyone waits is kept and delivered when the wait starts', async (t) => {
  const r = await hook({ raw: JSON.stringify({ id: 'early-1', action: 'none' }) });
  t.equal(r.status, 201, r.text);
  t.match(r.body, { event_id: 'early-1', status: 'queued', conversation_id: null });
  const id = await waiting(t, 'early-1');
  const found = await recordUntil(id, (x) => Array.isArray(x.state.events), 'the early event to run');
  t.match(found.state.events, [{ id: 'early-1', timed_out: false, data: { id: 'early-1' } }]);
  const next = await c.chat('respond', { conversation_id: id, message: 'When are you open?' });
  t.match(next.body.response, /^Event early-1 arrived/);
  // Taken: a second conversation that waits for the same id does not get it again.
  const second = await waiting(t, 'early-1');
  await new Promise((r) => setTimeout(r, 500));
  t.notOk((await rec(second)).state.events, 'an event is delivered to one conversation');
  t.equal((await rec(second)).state.awaiting_external_event?.event_id, 'early-1', 'it still waits');
  const repeat = await hook({ raw: JSON.stringify({ id: 'early-1' }) });
  t.match(repeat.body, { status: 'delivered', conversation_id: id, duplicate: true }, 'a repeat names the conversation that took it');
  t.notOk((await rec(second)).state.events, 'and does not resume the second');
});

t.test('the same event delivered twice resumes once', async (t) => {
  const id = await waiting(t, 'dup-1');
  const body = JSON.stringify({ id: 'dup-1' });
  const first = await hook({ raw: body });
  const second = await hook({ raw: JSON.stringify({ id: 'dup-1', other: true }) });
  t.equal(first.status, 201);
  t.equal(second.status, 201);
  t.equal(first.body.duplicate, false);
  t.equal(second.body.duplicate, true, 'the second delivery is named a duplicate');
  t.equal(second.body.id, first.body.id, 'the same stored event');
  const stored = await rec(id);
  t.equal(stored.state.events.length, 1, 'the function ran once');
  t.equal(stored.state.events[0].body, body, 'the first body is kept');
  // Both deliveries at once: still once.
  const id2 = await waiting(t, 'dup-2');
  const both = await Promise.all([hook({ raw: '{"id":"dup-2"}' }), hook({ raw: '{"id":"dup-2"}' })]);
  t.same(both.map((b) => b.status), [201, 201]);
  t.equal((await rec(id2))!.state.events.length, 1, 'concurrent duplicates run once');
});

t.test('a wait times out: the function runs with timed_out and the next respond shows it', async (t) => {
  const id = await waiting(t, 'late-1', 1200);
  const found = await recordUntil(id, (x) => Array.isArray(x.state.events), 'the timeout');
  t.same(found.state.events, [{ id: 'late-1', timed_out: true, content_type: '', body: '', data: null }]);
  t.notOk('awaiting_external_event' in found.state);
  const late = await hook({ raw: '{"id":"late-1"}' });
  t.equal(late.status, 201);
  t.equal(late.body.status, 'queued', 'an event after the timeout resumes nothing');
  const next = await c.chat('respond', { conversation_id: id, message: 'When are you open?' });
  t.match(next.body.response, /^No answer for late-1/);
});

/** The stored waits (`external_waits`) of a conversation, read afresh from the data dir. */
const waitsOf = async (id: string): Promise<Array<{ event_id: string }>> => {
  store.refresh();
  return externalWaitRecords(store).find({ conversation_id: id });
};

t.test('a wait\'s record lasts as long as the wait: delivered, found early or timed out, it is deleted', async (t) => {
  const delivered = await waiting(t, 'gone-1');
  t.match(await waitsOf(delivered), [{ event_id: 'gone-1' }], 'stored while the conversation waits');
  const r = await hook({ raw: '{"id":"gone-1"}' });
  t.match(r.body, { status: 'delivered', conversation_id: delivered });
  t.same(await waitsOf(delivered), [], 'deleted once the webhook delivered the event');

  t.equal((await hook({ raw: '{"id":"gone-2"}' })).body.status, 'queued');
  const early = await waiting(t, 'gone-2');
  t.same(await waitsOf(early), [], 'deleted once the wait found an early event');

  const late = await waiting(t, 'gone-3', 1200);
  t.match(await waitsOf(late), [{ event_id: 'gone-3' }]);
  await recordUntil(late, (x) => Array.isArray(x.state.events), 'the timeout');
  t.same(await waitsOf(late), [], 'deleted once the deadline passed');

  // Two conversations wait for one id (the later one's wait replaces the other's): the first one's timeout
  // deletes its own wait only.
  const first = await waiting(t, 'gone-4', 1200);
  const second = await waiting(t, 'gone-4');
  await recordUntil(first, (x) => Array.isArray(x.state.events), 'the timeout');
  t.match(await waitsOf(second), [{ event_id: 'gone-4' }], 'the wait of the other conversation for the same id stands');
  t.match((await hook({ raw: '{"id":"gone-4"}' })).body, { status: 'delivered', conversation_id: second });
  t.same(await waitsOf(second), [], 'and goes when it is delivered');
});

t.test('a function may end the conversation or wait again', async (t) => {
  const id = await waiting(t, 'chain-1');
  t.equal((await hook({ raw: '{"id":"chain-1","action":"again"}' })).body.status, 'delivered');
  const stored = await rec(id);
  t.equal(stored.state.awaiting_external_event.event_id, 'chain-1-2', 'waits for the next one');
  t.equal((await hook({ raw: '{"id":"chain-1-2","action":"end"}' })).body.status, 'delivered');
  const ended = await recordUntil(id, (x) => !x.in_progress, 'the end');
  t.equal(ended.end_reason, 'agent');
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hi' })).status, 409, 'ended');
});

/**
 * A function that renews its own wait at every timeout (`loop:<chars>:<timeout_ms>`): each round counts in
 * `conv.state.n`, waits again with `timeout_ms: 0` and says `<n>:` and `<chars>` w's.
 */
const LOOP_FUNCTIONS: Record<string, string> = {
  turn: `function turn(conv, message) {
    const m = /^loop:(\\d+):(\\d+)$/.exec(message);
    if (!m) return undefined;
    conv.state.say = Number(m[1]);
    conv.await_external_event('tick-0', { timeout_ms: Number(m[2]) });
    return 'looping';
  }`,
  external_event: `function external_event(conv, event) {
    conv.state.n = (conv.state.n || 0) + 1;
    conv.await_external_event('tick-' + conv.state.n, { timeout_ms: 0 });
    conv.say(conv.state.n + ':' + 'w'.repeat(conv.state.say));
  }`,
};

t.test('a wait shorter than a second is a second: timeout_ms 0 does not expire at once', async (t) => {
  const loop = await chatProject(p, { name: 'Loop Floor Co', functions: LOOP_FUNCTIONS });
  const id = (await loop.chat('create', {})).body.conversation_id;
  t.equal((await loop.chat('respond', { conversation_id: id, message: 'loop:1:0' })).body.response, 'looping');
  // The journal keeps every wait the conversation started (`conversation.changed`) and the message's arrival.
  const entries = await store.journal.ofActor(`conversation/${id}`, {});
  const events = entries.flatMap((e) => e.events);
  const arrived = Date.parse((events.find((e) => e.type === 'conversation.turn' && (e.data as any).turn.user_input === 'loop:1:0')!.data as any).turn.user_input_datetime);
  const wait = events.map((e) => (e.data as any).awaiting_external_event).find((w) => w?.event_id === 'tick-0');
  t.ok(wait, 'the wait was started');
  t.ok(Date.parse(wait.deadline) - arrived >= 1000, `its deadline is a second or more after the message (${Date.parse(wait.deadline) - arrived} ms)`);
  await loop.chat('close', { conversation_id: id });
});

t.test('a wait renewed only by its own timeouts stops after MAX_TIMEOUT_ROUNDS; what it said is bounded and marked', async (t) => {
  const loop = await chatProject(p, { name: 'Loop Chain Co', functions: LOOP_FUNCTIONS });
  const id = (await loop.chat('create', {})).body.conversation_id;
  t.equal((await loop.chat('respond', { conversation_id: id, message: 'loop:3000:0' })).body.response, 'looping');
  const stopped = await recordUntil(id, (x) => x.state.n === MAX_TIMEOUT_ROUNDS && !('awaiting_external_event' in x.state), 'the chain to stop', 60_000);
  t.equal(stopped.function_errors, 1, 'the refused wait is a function error');
  t.equal(stopped.in_progress, true, 'the conversation goes on, idle');
  t.equal(stopped.turns.filter((x: any) => x.user_input === '').length, MAX_TIMEOUT_ROUNDS + 1, 'every round\'s words are in the transcript (after the opening reply)');
  const next = await loop.chat('respond', { conversation_id: id, message: 'When are you open?' });
  t.equal(next.status, 200, next.text.slice(0, 200));
  const response: string = next.body.response;
  t.ok(response.startsWith(`${UNREAD_DROPPED} `), 'older words were dropped: the response says so first');
  t.match(response, new RegExp(` ${MAX_TIMEOUT_ROUNDS}:w{3000} `), 'the newest are kept');
  t.notMatch(response, / 1:w/, 'the oldest are not');
  t.ok(response.length < MAX_UNREAD_CHARS + 1000, `bounded (${response.length} characters)`);
  await loop.chat('close', { conversation_id: id });
});

/**
 * Functions whose `external_event` takes 1.5 s (a wait of one second, `slow-wait`), so that a client's request
 * arrives while it runs: the conversation's state is `externalResponding` on the wait's timer, no event's step.
 */
const SLOW_EVENT_FUNCTIONS: Record<string, string> = {
  turn: `function turn(conv, message) {
    if (message !== 'slow-wait') return undefined;
    conv.await_external_event('slow-1', { timeout_ms: 1000 });
    return 'waiting';
  }`,
  external_event: `function external_event(conv, event) {
    const until = Date.now() + 1500;
    while (Date.now() < until) {}
    conv.say('timed out ' + event.timed_out);
  }`,
};

/** A conversation of `proj` whose external_event is running now (its stored snapshot says so). */
async function midExternalEvent(t: Test, proj: ChatProject): Promise<string> {
  const id = (await proj.chat('create', {})).body.conversation_id;
  t.equal((await proj.chat('respond', { conversation_id: id, message: 'slow-wait' })).body.response, 'waiting');
  for (;;) {
    const snap = await store.snapshots.get(`conversation/${id}`);
    if ((snap?.data as any)?.s?.value === 'externalResponding') return id;
    await new Promise((r) => setTimeout(r, 20));
  }
}

t.test('a Chat API close while external_event runs is applied once it is done, and answered truly', async (t) => {
  const slow = await chatProject(p, { name: 'Slow Close Co', functions: SLOW_EVENT_FUNCTIONS });
  const id = await midExternalEvent(t, slow);
  const closed = await slow.chat('close', { conversation_id: id });
  t.equal(closed.status, 200, closed.text);
  t.same(closed.body, { success: true });
  const ended = await rec(id);
  t.equal(ended.in_progress, false, 'the conversation has ended by the time the close is answered');
  t.equal(ended.end_reason, 'closed');
  t.notOk('awaiting_external_event' in ended.state);
  t.equal((await slow.chat('respond', { conversation_id: id, message: 'still there?' })).status, 409, 'a later respond is refused');
});

t.test('a respond while external_event runs is a turn once it is done, after what the function said', async (t) => {
  const slow = await chatProject(p, { name: 'Slow Respond Co', functions: SLOW_EVENT_FUNCTIONS });
  const id = await midExternalEvent(t, slow);
  const r = await slow.chat('respond', { conversation_id: id, message: 'When are you open?' });
  t.equal(r.status, 200, r.text);
  t.match(r.body.response, /^timed out true We are open/);
  t.equal(r.body.end_conversation, false);
  t.equal((await slow.chat('respond', { conversation_id: id, message: 'When are you open?' })).status, 200, 'the conversation goes on');
});

t.test('a bridge-ended notification while external_event runs runs bridge_ended once it is done', async (t) => {
  const slow = await chatProject(p, { name: 'Slow Bridge Co', functions: { ...SLOW_EVENT_FUNCTIONS, bridge_ended: FUNCTIONS.bridge_ended } });
  const slowKey = await externalKey(p, slow);
  const id = await midExternalEvent(t, slow);
  const r = await http(p.edge, 'POST', '/internal/v1/agentic-dial/bridge-ended', { body: { conversation_id: id, bridge_duration_seconds: 3, call_duration_seconds: 4 }, headers: { 'x-api-key': slowKey } });
  t.equal(r.status, 200, r.text);
  t.match(r.body, { success: true, bridge_ended: { bridge_duration_seconds: 3, call_duration_seconds: 4 } });
  const after = await rec(id);
  t.equal(after.state.bridge_runs, 1, 'bridge_ended ran');
  t.match(after.turns.at(-1), { user_input: '', agent_response: 'timed out true' }, 'and external_event too');
});

t.test('tenant isolation: another project\'s key or id never resumes this conversation', async (t) => {
  const id = await waiting(t, 'iso-1');
  const foreignKey = await hook({ key: otherKey, raw: '{"id":"iso-1"}' });
  t.equal(foreignKey.status, 401, 'another project\'s key for this project');
  t.match(foreignKey.body, { error_message: /not valid for this account and project/ });
  const ownProject = await hook({ key: otherKey, project: other, raw: '{"id":"iso-1"}' });
  t.equal(ownProject.status, 201, 'the other project may send the same id to itself');
  t.equal(ownProject.body.status, 'queued', 'it resumes nothing here');
  t.notOk((await rec(id))!.state.events, 'this conversation did not run');
  const chatKey = await hook({ key: c.chatKey, raw: '{"id":"iso-1"}' });
  t.equal(chatKey.status, 401, 'a key of another scope');
  // The other project's waiting conversation is not resumed by this project's event of the same id.
  const theirs = await waiting(t, 'iso-2', undefined, other);
  t.equal((await hook({ raw: '{"id":"iso-2"}' })).body.status, 'queued');
  t.notOk((await rec(theirs))!.state.events);
  t.equal((await hook({ raw: '{"id":"iso-1"}' })).body.status, 'delivered', 'the right key delivers');
});

t.test('every error row answers {error_message}', async (t) => {
  const rows: Array<[string, Hook, number, RegExp]> = [
    ['no key', { key: null, raw: '{"id":"e"}' }, 401, /missing X-Api-Key/],
    ['unknown key', { key: 'sbk_nope', raw: '{"id":"e"}' }, 401, /invalid X-Api-Key/],
    ['missing event_id_location', { query: { event_id_location: '' }, raw: '{"id":"e"}' }, 400, /event_id_location is required/],
    ['missing event_id_path', { query: { event_id_path: '' }, raw: '{"id":"e"}' }, 400, /event_id_path is required/],
    ['missing account_id', { query: { account_id: '' }, raw: '{"id":"e"}' }, 400, /account_id is required/],
    ['missing project_id', { query: { project_id: '' }, raw: '{"id":"e"}' }, 400, /project_id is required/],
    ['bad location', { query: { event_id_location: 'cookies' }, raw: '{"id":"e"}' }, 400, /must be one of headers, querystring, payload/],
    ['repeated parameter', { query: { event_id_path: ['id', 'other'] }, raw: '{"id":"e"}' }, 400, /event_id_path may be given only once/],
    ['parameter too long', { query: { event_id_path: 'x'.repeat(300) }, raw: '{"id":"e"}' }, 400, /event_id_path is longer than 256 characters/],
    ['own parameter as the query id', { query: { event_id_location: 'querystring', event_id_path: 'project_id' }, raw: '' }, 400, /event_id_path must be/],
    ['bad path', { query: { event_id_path: 'a..b' }, raw: '{"id":"e"}' }, 400, /event_id_path must be/],
    // A credential is stored nowhere: the webhook's own key (or any credential header) is never an event's id.
    ['the key header as the id', { query: { event_id_location: 'headers', event_id_path: 'X-Api-Key' }, raw: '' }, 400, /may not name a header that carries credentials/],
    ['authorization as the id', { query: { event_id_location: 'headers', event_id_path: 'authorization' }, raw: '' }, 400, /may not name a header that carries credentials/],
    ['cookie as the id', { query: { event_id_location: 'headers', event_id_path: 'COOKIE' }, raw: '' }, 400, /may not name a header that carries credentials/],
    ['unknown account', { query: { account_id: 'acc_nope' }, raw: '{"id":"e"}' }, 401, /not valid for this account and project/],
    ['id not in payload', { raw: '{"other":"e"}' }, 400, /event id not found in payload at id/],
    ['id not in headers', { query: { event_id_location: 'headers', event_id_path: 'x-ref' }, raw: '' }, 400, /event id not found in headers at x-ref/],
    ['a header named as what every object inherits', { query: { event_id_location: 'headers', event_id_path: 'constructor' }, raw: '' }, 400, /event id not found in headers at constructor/],
    ['id not in query', { query: { event_id_location: 'querystring', event_id_path: 'ref' }, raw: '' }, 400, /event id not found in querystring/],
    ['id is an object', { raw: '{"id":{"a":1}}' }, 400, /event id must be a string or number/],
    ['id too long', { raw: JSON.stringify({ id: 'x'.repeat(257) }) }, 400, /event id must be/],
    ['id with control characters', { raw: JSON.stringify({ id: 'a\nb' }) }, 400, /event id must be/],
    ['malformed JSON', { raw: '{"id":' }, 400, /body is not valid JSON/],
    ['too deep JSON', { raw: '['.repeat(100) + ']'.repeat(100) }, 400, /nests deeper/],
    ['malformed XML', { type: 'application/xml', raw: '<a><b></a>' }, 400, /body is not valid XML/],
    ['unsupported type', { type: 'image/png', raw: 'x' }, 400, /Content-Type must be/],
    ['octet stream', { type: 'application/octet-stream', raw: 'x' }, 400, /Content-Type must be/],
    ['multipart', { type: 'multipart/form-data; boundary=x', raw: '--x--' }, 400, /Content-Type must be/],
    ['too large', { raw: JSON.stringify({ id: 'e', pad: 'x'.repeat(5000) }) }, 400, /larger than 4096 bytes/],
  ];
  for (const [what, h, status, message] of rows) {
    const r = await hook(h);
    t.equal(r.status, status, `${what}: ${r.text}`);
    t.match(r.body, { error_message: message }, what);
    t.same(Object.keys(r.body), ['error_message'], `${what}: only error_message`);
  }
});

t.test('bytes that are not UTF-8, in the body or the query, are refused, not stored replaced', async (t) => {
  const base = `/v1/external-events/webhook?account_id=${c.accountId}&project_id=${c.agentId}`;
  const send = (query: string, body: Buffer | string, type: string) =>
    fetch(new URL(`${base}&${query}`, p.edge), { method: 'POST', headers: { 'x-api-key': key, 'content-type': type }, body: typeof body === 'string' ? body : new Blob([new Uint8Array(body)]) });
  const text = await send('event_id_location=payload&event_id_path=id', Buffer.from([0xff, 0xfe, 0xfd]), 'text/plain');
  t.equal(text.status, 400);
  t.same(await text.json(), { error_message: 'body is not valid UTF-8' });
  const json = await send('event_id_location=payload&event_id_path=id', Buffer.concat([Buffer.from('{"id":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]), 'application/json');
  t.equal(json.status, 400, 'JSON too');
  t.same(await json.json(), { error_message: 'body is not valid UTF-8' });
  const query = await send('event_id_location=querystring&event_id_path=r&r=%E0%A4%A', '', 'text/plain');
  t.equal(query.status, 400);
  t.same(await query.json(), { error_message: 'the query string is not valid percent-encoded UTF-8' });
  const fine = await send(`event_id_location=querystring&event_id_path=r&r=${encodeURIComponent('caf\u00e9-' + Date.now())}`, '', 'text/plain');
  t.equal(fine.status, 201, 'percent-encoded UTF-8 is taken');
});

t.test('two different event ids never read as one: form and XML escapes that decode to no text are refused', async (t) => {
  const r = Date.now();
  const form = (raw: string) => hook({ type: 'application/x-www-form-urlencoded', raw });
  const xmlBody = (raw: string, path = 'e.id') => hook({ type: 'application/xml', query: { event_id_path: path }, raw });
  // Latin-1 percent-encoding (café, cafè) would read as U+FFFD both: the second event answered as a duplicate of the first.
  for (const raw of [`id=caf%E9${r}&order=1`, `id=caf%E8${r}&order=2`, `id=caf%C3%A9${r}&note=100%zz`]) {
    const res = await form(raw);
    t.equal(res.status, 400, `${raw}: ${res.text}`);
    t.same(res.body, { error_message: 'body is not valid percent-encoded UTF-8' }, raw);
  }
  const utf8 = await form(`id=caf%C3%A9${r}&note=100%25`);
  t.equal(utf8.status, 201, utf8.text);
  t.match(utf8.body, { event_id: `café${r}`, duplicate: false }, 'percent-encoded UTF-8 is taken');
  t.equal((await form(`id=caf%C3%A8${r}`)).body.duplicate, false, 'another id is another event');

  // A reference to no character or to an undeclared entity, kept as written, would read as its own escaped form.
  for (const raw of [`<e><id>&#xD800;${r}</id></e>`, `<e><id>&#xDFFF;${r}</id></e>`, `<e><id>&#0;${r}</id></e>`, `<e><id>&#1114112;${r}</id></e>`, `<e><id>&nbsp;${r}</id></e>`, `<e><id>x${r}</id><n k="&#xD800;"/></e>`]) {
    const res = await xmlBody(raw);
    t.equal(res.status, 400, `${raw}: ${res.text}`);
    t.same(res.body, { error_message: 'body is not valid XML' }, raw);
  }
  const escaped = await xmlBody(`<e><id>&amp;#xD800;${r}</id></e>`);
  t.equal(escaped.status, 201, escaped.text);
  t.equal(escaped.body.event_id, `&#xD800;${r}`, 'the escaped form is its own id');
  // A CDATA section is text as written: its `&amp;` is not the `&` of an escape.
  const cdata = await xmlBody(`<e><id><![CDATA[cd&amp;${r}]]></id></e>`);
  t.equal(cdata.status, 201, cdata.text);
  t.match(cdata.body, { event_id: `cd&amp;${r}`, duplicate: false });
  const text = await xmlBody(`<e><id>cd&amp;${r}</id></e>`);
  t.match(text.body, { event_id: `cd&${r}`, duplicate: false }, 'the escape outside CDATA is decoded: another id');

  // JSON: lone surrogates would be stored as U+FFFD both, and a number past a double's range as null.
  const json = (raw: string) => hook({ type: 'application/json', raw });
  for (const raw of [`{"id":"a\\ud800${r}"}`, `{"id":"a\\udfff${r}"}`, `{"id":"j${r}","n":1e309}`]) {
    const res = await json(raw);
    t.equal(res.status, 400, `${raw}: ${res.text}`);
    t.same(res.body, { error_message: 'body is not valid JSON that can be stored as sent (I-JSON)' }, raw);
  }
  const pair = await json(`{"id":"a\\ud83d\\ude00${r}"}`);
  t.equal(pair.status, 201, pair.text);
  t.equal(pair.body.event_id, `a\u{1F600}${r}`, 'an escaped pair is its character');
});

t.test('XML entity expansion is refused (billion laughs, external entities)', async (t) => {
  const laughs = '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><lolz><id>&lol2;</id></lolz>';
  const xxe = '<?xml version="1.0"?><!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><foo><id>&xxe;</id></foo>';
  for (const raw of [laughs, xxe]) {
    const r = await hook({ type: 'application/xml', query: { event_id_path: 'lolz.id' }, raw });
    t.equal(r.status, 400, r.text);
    t.match(r.body, { error_message: 'XML with a DOCTYPE or entity declarations is refused' });
  }
  // XML's own escapes (the five predefined entities, character references) are decoded, as any XML reader
  // does: in the id, which then matches the conversation waiting for `ent&1`, in text and in attributes.
  const id = await waiting(t, 'ent&1');
  const r = await hook({ type: 'application/xml', query: { event_id_path: 'e.id' }, raw: '<e kind="a&lt;b"><id>ent&amp;1</id><note>caf&#233; &#x263A; &amp;#233;</note></e>' });
  t.equal(r.status, 201, r.text);
  t.match(r.body, { event_id: 'ent&1', status: 'delivered', conversation_id: id });
  const data = (await rec(id))!.state.events[0].data.e;
  t.equal(data.note, 'café ☺ &#233;', 'decoded once: an escaped reference stays a reference');
  t.equal(data['@kind'], 'a<b');
});

t.test('bridge-ended runs bridge_ended once and shows in the record via the Conversations API', async (t) => {
  const created = await c.chat('create', {});
  const id = created.body.conversation_id;
  const bridge = (body: unknown, k: string | null = key) =>
    http(p.edge, 'POST', '/internal/v1/agentic-dial/bridge-ended', { body, headers: k === null ? {} : { 'x-api-key': k } });
  const r = await bridge({ conversation_id: id, bridge_duration_seconds: 12.5, call_duration_seconds: 30 });
  t.equal(r.status, 200, r.text);
  t.match(r.body, { success: true, conversation_id: id, bridge_ended: { bridge_duration_seconds: 12.5, call_duration_seconds: 30, at: String } });
  const again = await bridge({ conversation_id: id, bridge_duration_seconds: 99, call_duration_seconds: 99 });
  t.equal(again.status, 200, 'idempotent');
  t.same(again.body.bridge_ended, r.body.bridge_ended, 'the first notification stands');
  const convs = conversationsClient(p, c, await conversationsKey(p, c));
  const list = await convs({ start_time: new Date(Date.now() - 3600_000).toISOString(), end_time: new Date(Date.now() + 60_000).toISOString() });
  t.equal(list.status, 200, 'listed');
  const listed = list.body.conversations.find((x: any) => x.id === id);
  t.same(listed.state.bridge_ended, r.body.bridge_ended, 'recorded in the state');
  t.equal(listed.state.bridge_seen, '12.5/30', 'the function ran with the bridge data');
  t.equal(listed.state.bridge_runs, 1, 'once');
  t.equal(listed.in_progress, true, 'the conversation goes on');
  // After the end too.
  const ended = (await c.chat('create', {})).body.conversation_id;
  await c.chat('close', { conversation_id: ended });
  const late = await bridge({ conversation_id: ended, bridge_duration_seconds: 1, call_duration_seconds: 2 });
  t.equal(late.status, 200, late.text);
  const endedRec = await rec(ended);
  t.equal(endedRec!.in_progress, false, 'still ended');
  t.equal(endedRec!.state.bridge_seen, '1/2');

  const rows: Array<[string, unknown, string | null, number, RegExp]> = [
    ['no key', { conversation_id: id, bridge_duration_seconds: 1, call_duration_seconds: 1 }, null, 401, /missing X-Api-Key/],
    ['chat key', { conversation_id: id, bridge_duration_seconds: 1, call_duration_seconds: 1 }, c.chatKey, 401, /invalid X-Api-Key/],
    ['not an object', [1], key, 400, /body must be a JSON object/],
    ['no conversation_id', { bridge_duration_seconds: 1, call_duration_seconds: 1 }, key, 400, /conversation_id must be/],
    ['string duration', { conversation_id: id, bridge_duration_seconds: '1', call_duration_seconds: 1 }, key, 400, /bridge_duration_seconds must be a number/],
    ['negative duration', { conversation_id: id, bridge_duration_seconds: 1, call_duration_seconds: -1 }, key, 400, /call_duration_seconds must be a number/],
    ['missing duration', { conversation_id: id, bridge_duration_seconds: 1 }, key, 400, /call_duration_seconds must be/],
    ['unknown conversation', { conversation_id: 'nope', bridge_duration_seconds: 1, call_duration_seconds: 1 }, key, 404, /conversation not found/],
    ['another project\'s key', { conversation_id: id, bridge_duration_seconds: 1, call_duration_seconds: 1 }, otherKey, 404, /conversation not found/],
  ];
  for (const [what, body, k, status, message] of rows) {
    const res = await bridge(body, k);
    t.equal(res.status, status, `${what}: ${res.text}`);
    t.match(res.body, { error_message: message }, what);
  }
  const malformed = await http(p.edge, 'POST', '/internal/v1/agentic-dial/bridge-ended', { raw: '{', headers: { 'x-api-key': key, 'content-type': 'application/json' } });
  t.equal(malformed.status, 400);
  t.match(malformed.body, { error_message: /not valid JSON/ });
});

t.test('webchat: the agent\'s message arrives at once as an agent message event', async (t) => {
  const m: MessagingProject = await messagingProject(p, { name: 'Web Co', functions: FUNCTIONS });
  const mkey = await externalKey(p, m);
  const { sessionId, accessToken } = await m.session();
  const ws = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  t.teardown(() => ws.close());
  ws.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await ws.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  const from = ws.flat().length;
  ws.send(T('USER_MESSAGE'), { text: 'wait:web-1' });
  await ws.waitFor((e) => e.type === T('SERVICE_AGENT_MESSAGE') && e.payload.text === 'Waiting for web-1', 'waiting reply', from);
  const r = await webhook(p.edge, m, mkey, { raw: '{"id":"web-1"}' });
  t.equal(r.status, 201, r.text);
  t.equal(r.body.status, 'delivered');
  const pushed = await ws.waitFor((e) => e.type === T('SERVICE_AGENT_MESSAGE') && e.payload.text === 'Event web-1 arrived', 'pushed message', from);
  t.type(pushed.sequence, 'number', 'journaled');
  // Ending from an external event ends the session.
  const from2 = ws.flat().length;
  ws.send(T('USER_MESSAGE'), { text: 'wait:web-2' });
  await ws.waitFor((e) => e.payload?.text === 'Waiting for web-2', 'second wait', from2);
  t.equal((await webhook(p.edge, m, mkey, { raw: '{"id":"web-2","action":"end"}' })).status, 201);
  await ws.waitFor((e) => e.type === T('SERVICE_AGENT_MESSAGE') && e.payload.text === 'Payment received, goodbye', 'goodbye', from2);
  const end = await ws.waitFor(is('SESSION_END'), 'session end', from2);
  t.equal(end.payload.reason, 'REASON_NATURAL_END');

  // A handoff from an external event's function hands the webchat user over too, as a turn's handoff does: here
  // no live agent can take it (the account has no live_agent key), so the handoff fails and the session ends.
  const s2 = await m.session();
  const ws2 = await connect(p.socket, { session_id: s2.sessionId, access_token: s2.accessToken });
  t.teardown(() => ws2.close());
  ws2.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await ws2.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  const from3 = ws2.flat().length;
  ws2.send(T('USER_MESSAGE'), { text: 'wait:web-3' });
  await ws2.waitFor((e) => e.payload?.text === 'Waiting for web-3', 'third wait', from3);
  t.equal((await webhook(p.edge, m, mkey, { raw: '{"id":"web-3","action":"handoff"}' })).status, 201);
  await ws2.waitFor(is('SESSION_END'), 'the session ends after the failed handoff', from3);
  const flow = ws2.flat().slice(from3).map((e) => e.type).filter((type) => type !== T('SERVICE_AGENT_THINKING'));
  t.same(flow.slice(flow.indexOf(T('SERVICE_AGENT_MESSAGE'), 2)), [T('SERVICE_AGENT_MESSAGE'), T('SERVICE_AGENT_TRIGGERED_HANDOFF'), T('HANDOFF_FAILED'), T('SYSTEM_MESSAGE'), T('SESSION_END')], 'what the function said, then the handoff as a turn\'s');
  t.ok(ws2.flat().some((e) => e.payload?.text === 'Passing you to a person'));
});

const shaped = (status: number, body: any, allowed: number[]) => {
  if (!allowed.includes(status)) throw new Error(`status ${status}: ${JSON.stringify(body)}`);
  if (status >= 400 && (typeof body?.error_message !== 'string' || Object.keys(body).length !== 1)) throw new Error(`not {error_message}: ${JSON.stringify(body)}`);
  return true;
};

t.test('fast-check: any query string, content type and body is a 201 or a 4xx in {error_message}, never a 500', async (t) => {
  const own = fc.record({
    event_id_location: fc.oneof(fc.constantFrom('headers', 'querystring', 'payload'), fc.string({ maxLength: 12 })),
    event_id_path: fc.oneof(fc.constantFrom('id', 'a.b', 'a.0.b', 'x-ref', 'x-api-key', '__proto__', 'constructor.prototype', '@id', 'a..b', ''), fc.string({ maxLength: 40 })),
    account_id: fc.oneof(fc.constant(c.accountId), fc.constant(c.accountSlug), fc.string({ maxLength: 20 })),
    project_id: fc.oneof(fc.constant(c.agentId), fc.constant(other.agentId), fc.string({ maxLength: 20 })),
  }, { requiredKeys: [] });
  const extra = fc.dictionary(fc.oneof(fc.constantFrom('id', 'ref', 'a.b', 'event_id_path'), fc.string({ maxLength: 10 })), fc.string({ maxLength: 30 }), { maxKeys: 3 });
  const body = fc.oneof(
    fc.jsonValue().map((v) => ['application/json', JSON.stringify(v) ?? ''] as const),
    fc.string({ maxLength: 200 }).map((v) => ['application/json', v] as const),
    fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 20 })).map((d) => ['application/x-www-form-urlencoded', new URLSearchParams(d).toString()] as const),
    fc.string({ maxLength: 200 }).map((v) => ['application/x-www-form-urlencoded', v] as const),
    fc.string({ maxLength: 200 }).map((v) => ['application/xml', v] as const),
    // Not String(v): a generated object may have a "toString" or "valueOf" key that is not a function.
    fc.jsonValue().map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).map((v) => ['application/xml', `<r>${v}</r><id a="1">${v}</id>`] as const),
    fc.string({ unit: 'binary', maxLength: 200 }).map((v) => ['text/plain', v] as const),
    fc.tuple(fc.string({ maxLength: 30 }), fc.string({ maxLength: 50 })).map(([ct, v]) => [ct, v] as const),
  );
  await fc.assert(
    fc.asyncProperty(own, extra, body, fc.option(fc.string({ maxLength: 40 }), { nil: undefined }), async (q, more, [type, raw], ref) => {
      const query = new URLSearchParams();
      for (const [k, v] of Object.entries(more)) query.append(k, v);
      for (const [k, v] of Object.entries(q)) query.append(k, v as string);
      const headers: Record<string, string> = { 'x-api-key': key };
      if (/^[\t\x20-\x7e]*$/.test(type)) headers['content-type'] = type;
      if (ref !== undefined && /^[\t\x20-\x7e]*$/.test(ref)) headers['x-ref'] = ref;
      const r = await http(p.edge, 'POST', `/v1/external-events/webhook?${query}`, { raw, headers });
      return shaped(r.status, r.body, [201, 400, 401]);
    }),
    { numRuns: Number(process.env.EE_FUZZ_RUNS ?? 150) },
  );
  // Raw query strings, not built by URLSearchParams: bad escapes, repeated keys, odd separators.
  await fc.assert(
    fc.asyncProperty(fc.string({ maxLength: 120 }), async (qs) => {
      const safe = qs.replace(/[#\s]/g, '');
      const r = await http(p.edge, 'POST', `/v1/external-events/webhook?${safe}&account_id=${c.accountId}&project_id=${c.agentId}`, { raw: '{"id":"q"}', headers: { 'x-api-key': key, 'content-type': 'application/json' } });
      return shaped(r.status, r.body, [201, 400, 401]);
    }),
    { numRuns: 100 },
  );
  t.pass('no 500');
});

t.test('fast-check: any bridge-ended body is a 200 or a 4xx in {error_message}, never a 500', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(
        fc.jsonValue(),
        fc.record({
          conversation_id: fc.oneof(fc.constant(id), fc.jsonValue()),
          bridge_duration_seconds: fc.oneof(fc.double(), fc.jsonValue()),
          call_duration_seconds: fc.oneof(fc.double({ min: 0, max: 1e6, noNaN: true }), fc.jsonValue()),
        }, { requiredKeys: [] }),
      ),
      async (body) => {
        const r = await http(p.edge, 'POST', '/internal/v1/agentic-dial/bridge-ended', { raw: JSON.stringify(body) ?? '', headers: { 'x-api-key': key, 'content-type': 'application/json' } });
        return shaped(r.status, r.body, [200, 400, 404]);
      },
    ),
    { numRuns: 100 },
  );
  t.pass('no 500');
});
