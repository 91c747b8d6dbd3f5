import t from 'tap';
import WebSocket from 'ws';
import { XMLParser } from 'fast-xml-parser';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { http } from './helpers/http.js';
import { connect, is, messagingProject, T } from './helpers/messaging.js';
import { waitForProjections } from './helpers/projections.js';
import { platformFor, type Platform } from './helpers/platform.js';
import { MACHINES } from '../machines/catalog.js';
import { chartOf, statesOf } from '../gateway/edge/inspector/chart/graph.js';
import { machineSvg } from '../gateway/edge/inspector/chart/svg.js';
import { setup } from 'xstate';
import { mask } from '../gateway/edge/inspector/mask.js';
import { readSse } from './helpers/sse.js';

// The inspector's admin API, its SSE stream and its @statelyai/inspect WebSocket feed, against a started
// platform (one process, embedded store).
let p: Platform;
let c: ChatProject;
const auth = () => ({ authorization: `Bearer ${p.operatorToken}` });
const get = (path: string, headers: Record<string, string> = auth()) => http(p.edge, 'GET', `/admin/v1/inspector${path}`, { headers });

t.before(async () => {
  p = await platformFor(t);
  c = await chatProject(p, { name: 'Inspect Co' });
});

t.test('401 without the operator token, on every inspector route, the feed and the stream', async (t) => {
  for (const path of ['/machines', '/machines/conversation.svg', '/fleet', '/actors', '/actors/conversation/x', '/actors/conversation/x/events']) {
    const none = await get(path, {});
    t.equal(none.status, 401, `${path} without a token`);
    t.match(none.body, { message: 'missing or invalid operator token' });
    t.equal((await get(path, { authorization: 'Bearer not-the-token-at-all' })).status, 401, `${path} with a wrong token`);
  }
  const refused = await new Promise<number>((resolve) => {
    const ws = new WebSocket(`${p.edge.replace('http', 'ws')}/admin/v1/inspector/actors/conversation/x/inspect`);
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.on('open', () => resolve(101));
    ws.on('error', () => undefined);
  });
  t.equal(refused, 401, 'the WebSocket feed refuses the upgrade without the token');
  t.equal((await get('/actors/conversation/x/inspect', {})).status, 401, 'a plain GET of the feed without a token');
});

/** The status a WebSocket upgrade of the feed at `query` is answered with (101 when it opens). */
const upgradeStatus = (path: string) =>
  new Promise<number>((resolve) => {
    const ws = new WebSocket(`${p.edge.replace('http', 'ws')}/admin/v1/inspector${path}`, { headers: auth() });
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.on('open', () => {
      ws.close();
      resolve(101);
    });
    ws.on('error', () => undefined);
  });

t.test('the feed path: a plain GET is told it takes upgrades only (400); an upgrade with a bad unmasked flag is refused like the REST routes', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  const plain = await get(`/actors/conversation/${id}/inspect`);
  t.equal(plain.status, 400);
  t.same(plain.body, { message: 'expected a WebSocket upgrade (version 13)', errors: [{ field: 'upgrade', message: 'expected a WebSocket upgrade (version 13)' }] });
  for (const bad of ['zz', 'TRUE', '1']) t.equal(await upgradeStatus(`/actors/conversation/${id}/inspect?unmasked=${bad}`), 400, `unmasked=${bad}`);
  t.equal(await upgradeStatus(`/actors/conversation/${id}/inspect?unmasked=true&unmasked=false`), 400, 'given twice');
  t.equal(await upgradeStatus(`/actors/conversation/${id}/inspect?unmasked=false`), 101);
  t.equal(await upgradeStatus(`/actors/conversation/${id}/inspect?unmasked=true`), 101);
});

t.test('values a function marks personal are masked wherever they appear: the marking event, the answer that repeats one, the stream and the feed', async (t) => {
  // The function marks the member code and repeats it in its answer; the code holds no digits, so only the mark hides it.
  const marking = await chatProject(p, { name: 'Marks Co', functions: { turn: `function turn(conv, message) { const m = /member code (\\w+)/.exec(message); if (m) { conv.mark_pii(m[1]); return 'noted your code ' + m[1]; } return 'ok'; }` } });
  const id = (await marking.chat('create', {})).body.conversation_id;
  const sse = readSse(`${p.edge}/admin/v1/inspector/actors/conversation/${id}/events`, auth());
  await sse.next((e) => e.event === 'snapshot');
  const ws = new WebSocket(`${p.edge.replace('http', 'ws')}/admin/v1/inspector/actors/conversation/${id}/inspect`, { headers: auth() });
  const feed: string[] = [];
  ws.on('message', (data) => feed.push(String(data)));
  await new Promise((r) => ws.once('message', r));
  const said = await marking.chat('respond', { conversation_id: id, message: 'my member code QuokkaZeta7 please' });
  t.equal(said.status, 200, said.text);
  t.match(JSON.stringify(said.body), 'QuokkaZeta7', 'the answer repeats the code (the Chat API is not the inspector)');

  const raw = await get(`/actors/conversation/${id}?unmasked=true&journal=20`);
  t.match(JSON.stringify(raw.body), 'QuokkaZeta7', 'unmasked on request: the code is there to hide');
  t.ok(raw.body.journal.some((s: any) => s.events.some((e: any) => e.type === 'conversation.pii_marked')), 'the marking event is journaled');
  const masked = await get(`/actors/conversation/${id}?journal=20`);
  t.notMatch(JSON.stringify(masked.body).toLowerCase(), 'quokkazeta7', 'masked: neither the marking event nor the answer nor the context shows it, in any case');
  const marked = masked.body.journal.flatMap((s: any) => s.events).find((e: any) => e.type === 'conversation.pii_marked');
  t.same(marked.data.values, ['•••'], 'the marking event keeps its shape');

  const steps: unknown[] = [];
  for (;;) {
    const e = await sse.next((x) => x.event === 'step');
    steps.push(e.data);
    if (e.data.value === 'idle') break;
  }
  t.notMatch(JSON.stringify(steps).toLowerCase(), 'quokkazeta7', 'the stream masks the steps that mark it');
  sse.close();
  const snap = async () => {
    for (let i = 0; i < 100 && !feed.some((m) => m.includes('"@xstate.snapshot"') && m.includes('"idle"')); i++) await new Promise((r) => setTimeout(r, 50));
  };
  await snap();
  t.ok(feed.some((m) => m.includes('conversation.pii_marked')), 'the feed sent the marking event');
  t.notMatch(feed.join('\n').toLowerCase(), 'quokkazeta7', 'the feed masks it too');
  ws.close();
  await new Promise((r) => ws.once('close', r));
});

t.test("a messaging session's agent messages stay readable but for rules 2 and 3; the user's are masked whole", async (t) => {
  // The agent's reply is in a field named `text`, as the user's message is: the event's type tells them apart.
  const m = await messagingProject(p, { name: 'Session Co', functions: { turn: `function turn(conv, message) { conv.mark_pii('Zanzibar'); return 'Your parcel to Zanzibar ships today, write to help@example.com'; }` } });
  const { sessionId, accessToken } = await m.session();
  const ws = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  t.teardown(() => ws.close());
  ws.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await ws.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  const feed = new WebSocket(`${p.edge.replace('http', 'ws')}/admin/v1/inspector/actors/session/${sessionId}/inspect`, { headers: auth() });
  const fed: any[] = [];
  const fedWaiters: Array<() => void> = [];
  feed.on('message', (data) => {
    fed.push(JSON.parse(String(data)));
    for (const w of fedWaiters.splice(0)) w();
  });
  const fedUntil = async (pred: (m: any) => boolean) => {
    for (;;) {
      const found = fed.find(pred);
      if (found) return found;
      await new Promise<void>((r) => fedWaiters.push(r));
    }
  };
  await fedUntil((m) => m.type === '@xstate.actor');
  const from = ws.flat().length;
  ws.send(T('USER_MESSAGE'), { text: 'where is my parcel Zanzibar' });
  await ws.waitFor((e) => e.type === T('SERVICE_AGENT_MESSAGE') && /ships today/.test(e.payload.text), 'the reply', from);
  const fedReply = await fedUntil((m) => m.type === '@xstate.event' && m.event.type === 'session.agent_message');
  t.equal(fedReply.event.text, 'Your parcel to ••• ships today, write to •••@•••', 'the feed shows the reply as the page does');
  const fedAsked = await fedUntil((m) => m.type === '@xstate.event' && m.event.type === 'session.user_message');
  t.equal(fedAsked.event.text, '•••(27)');
  feed.close();
  await new Promise((r) => feed.once('close', r));

  const masked = await get(`/actors/session/${sessionId}?journal=20`);
  t.equal(masked.status, 200);
  const events = masked.body.journal.flatMap((s: any) => s.events);
  const replies = events.filter((e: any) => e.type === 'session.agent_message').map((e: any) => e.data.text);
  t.ok(replies.length >= 2, 'the greeting and the reply');
  t.ok(replies.every((x: string) => !x.startsWith('•••(')), `agent messages readable: ${JSON.stringify(replies)}`);
  t.ok(replies.includes('Your parcel to ••• ships today, write to •••@•••'), 'rules 2 and 3 still apply to them');
  const asked = events.find((e: any) => e.type === 'session.user_message');
  t.equal(asked.data.text, '•••(27)', "the user's message is masked whole");
  const started = events.find((e: any) => e.type === 'session.started');
  t.match(started.data.user_agent, /^•••\(\d+\)$/, "the client's User-Agent (it may identify a person's device) is masked whole");
  t.notMatch(JSON.stringify(masked.body), 'Zanzibar', 'nowhere else either');
  const raw = await get(`/actors/session/${sessionId}?journal=20&unmasked=true`);
  t.ok(raw.body.journal.flatMap((s: any) => s.events).some((e: any) => e.data.text === 'where is my parcel Zanzibar'), 'unmasked on request');
});

t.test('the machines: listed, and every kind as SVG with its states, transitions, effects and timers', async (t) => {
  const list = await get('/machines');
  t.equal(list.status, 200);
  t.same(list.body.data.map((m: { kind: string }) => m.kind), Object.keys(MACHINES).sort());
  const parser = new XMLParser({ ignoreAttributes: false });
  for (const kind of Object.keys(MACHINES)) {
    const r = await get(`/machines/${kind}.svg`);
    t.equal(r.status, 200, kind);
    t.match(r.headers.get('content-type') ?? '', /^image\/svg\+xml/);
    t.doesNotThrow(() => parser.parse(r.text), `${kind}: well-formed XML`);
    const chart = chartOf(MACHINES[kind]);
    for (const s of statesOf(chart).slice(1)) t.match(r.text, `data-path="${s.path.join('.')}"`, `${kind}: state ${s.path.join('.')} drawn`);
    for (const tr of chart.transitions) t.match(r.text, `data-transition="${tr.id}"`, `${kind}: transition ${tr.id} drawn`);
    for (const i of statesOf(chart).flatMap((s) => s.invokes)) t.match(r.text, i.timer ? `timer ${i.id} (sleepUntil)` : `invoke ${i.id}: ${i.src}`);
  }
  const conversation = (await get('/machines/conversation.svg')).text;
  t.match(conversation, 'done: start [ends]', 'a named guard on its transition');
  t.match(conversation, 'class="initial"', 'the initial state is marked');
  t.match(conversation, 'host effect: takeTurn', "the turn the actor host runs (the kind's effect) is on its state");
  t.match((await get('/machines/session.svg')).text, 'host effect: converse');
  const session = (await get('/machines/session.svg')).text;
  t.notMatch(session, 'timer idleTimer', "the session's idle expiry is the host's deadline, not an invoked timer");
  t.match(session, 'IDLE_TIMEOUT', 'the event the host sends for it');
  // No machine of the catalog has a parallel state now: the chart's drawing of one, from a machine of its own.
  const parallel = await machineSvg(
    setup({}).createMachine({ id: 'p', initial: 'active', states: { active: { type: 'parallel', states: { one: { initial: 'x', states: { x: {} } }, two: { initial: 'y', states: { y: {} } } } } } }),
  );
  t.match(parallel, /class="state parallel"[^>]*data-path="active"/, 'a parallel state');
  t.match(parallel, /class="state [a-z]+ region"[^>]*data-path="active.one"/, 'its regions');
  const unknown = await get('/machines/nope.svg');
  t.equal(unknown.status, 404);
  t.match(unknown.body, { errors: [{ field: 'kind' }] });
  t.equal((await get('/machines/conversation.png')).status, 422, 'only {kind}.svg (a malformed path: 422 as for ids)');
});

t.test('masking: a rule for contexts and events', async (t) => {
  const masked = mask({
    id: 'c1',
    start: { fromNumber: '+14155550123', toNumber: '+14155550199', channel: 'CHAT', at: 1700000000000 },
    turns: [{ user_input: 'my mail is ann@example.com', agent_response: 'I will mail ann@example.com or call +1 415 555 0123', latency: 0.2, is_ood: false }],
    state: { card: '4111' },
    endReason: 'closed',
    when: '2026-11-23T21:00:00.000Z',
    key: '123e4567-e89b-12d3-a456-426614174000',
  }) as any;
  t.equal(masked.id, 'c1');
  t.equal(masked.start.fromNumber, '•••(12)');
  t.equal(masked.start.channel, 'CHAT');
  t.equal(masked.start.at, 1700000000000);
  t.equal(masked.turns[0].user_input, '•••(26)');
  t.equal(masked.turns[0].agent_response, 'I will mail •••@••• or call •••23', 'addresses and numbers inside other text');
  t.equal(masked.turns[0].latency, 0.2);
  t.same(masked.state, { card: '•••(4)' }, 'conversation variables keep their keys');
  t.equal(masked.when, '2026-11-23T21:00:00.000Z', 'timestamps are not phone numbers');
  t.equal(masked.key, '123e4567-e89b-12d3-a456-426614174000', 'nor are UUIDs');
});

t.test('an actor: state, masked context (unmasked on request), deadlines, placement, journal; SSE of its steps', async (t) => {
  const created = await c.chat('create', { integration_attributes: { email: 'bob@example.com', phone: '+447700900123' } });
  t.equal(created.status, 200);
  const id = created.body.conversation_id;
  const first = await c.chat('respond', { conversation_id: id, message: 'Call me on +44 7700 900123 or bob@example.com: when are you open?' });
  t.equal(first.status, 200);

  const a = await get(`/actors/conversation/${id}`);
  t.equal(a.status, 200);
  t.equal(a.body.value, 'idle');
  t.equal(a.body.machine, 'conversation');
  t.equal(a.body.masked, true);
  t.equal(a.body.placement.owner, p.worker, 'the owner worker');
  t.ok(a.body.placement.fence >= 1 && a.body.placement.version >= 1);
  t.match(a.body.deadlines, [{ id: 'idleTimer', until: String }], 'the idle timer is pending');
  const text = JSON.stringify(a.body.context);
  t.notMatch(text, 'bob@example.com', 'no e-mail in the masked context');
  t.notMatch(text, '7700', 'no phone number in the masked context');
  t.notMatch(text, 'when are you open', 'no user words');
  t.equal(a.body.context.recent.find((m: { role: string }) => m.role === 'user').text, `•••(${'Call me on +44 7700 900123 or bob@example.com: when are you open?'.length})`);
  const raw = await get(`/actors/conversation/${id}?unmasked=true`);
  t.equal(raw.body.masked, false);
  t.match(JSON.stringify(raw.body.context), 'bob@example.com', 'unmasked on request');
  t.equal((await get(`/actors/conversation/nope`)).status, 404);
  t.equal((await get(`/actors/conversation/${id}?unmasked=yes`)).status, 400);

  // The stream: a snapshot at once, then a step (and the snapshot after it) for every committed transition.
  const sse = readSse(`${p.edge}/admin/v1/inspector/actors/conversation/${id}/events`, auth());
  const hello = await sse.next((e) => e.event === 'snapshot');
  t.equal(hello.data.value, 'idle');
  const before = hello.data.version;
  const second = await c.chat('respond', { conversation_id: id, message: 'Is there parking? Mail me at carol@example.com' });
  t.equal(second.status, 200);
  const steps = [];
  for (;;) {
    const e = await sse.next((x) => x.event === 'step');
    steps.push(e.data);
    t.ok(e.data.version > before);
    if (e.data.value === 'idle') break;
  }
  t.ok(steps.length >= 1, `${steps.length} steps streamed`);
  const after = await sse.next((x) => x.event === 'snapshot');
  t.equal(after.data.value, 'idle');
  t.notMatch(JSON.stringify(after.data.context), 'carol@example.com', 'the stream is masked too');
  sse.close();
});

t.test('the fleet: actors per kind and state, shards per worker; search by kind, state and project', async (t) => {
  const other = await chatProject(p, { name: 'Other Co' });
  const mine = (await c.chat('create', {})).body.conversation_id;
  const theirs = (await other.chat('create', {})).body.conversation_id;
  // The actor index is a projection of the journal, kept off the reply path by the projection runner.
  await waitForProjections(p);
  const fleet = await get('/fleet');
  t.equal(fleet.status, 200);
  t.ok(fleet.body.kinds.conversation.states.idle >= 2, 'conversations counted in idle');
  t.ok(fleet.body.kinds.conversation.total >= 2);
  t.same(fleet.body.workers.map((w: { id: string }) => w.id), [p.worker]);
  t.equal(fleet.body.workers[0].shards.length, fleet.body.shardCount, 'one worker owns every shard');
  t.same(fleet.body.unownedShards, []);
  const byProject = await get(`/actors?kind=conversation&project=${other.agentId}`);
  t.equal(byProject.status, 200);
  t.same(byProject.body.data.map((a: { id: string }) => a.id), [theirs], 'only that project');
  t.match(byProject.body.data[0], { kind: 'conversation', project_id: other.agentId, account_id: other.accountId, state: 'idle', value: 'idle' });
  const idle = await get(`/actors?kind=conversation&state=idle&project=${c.agentId}`);
  t.ok(idle.body.data.some((a: { id: string }) => a.id === mine));
  t.same((await get(`/actors?kind=conversation&state=ended&project=${c.agentId}`)).body.data, [], 'none ended');
  await c.chat('close', { conversation_id: mine });
  await waitForProjections(p);
  const ended = await get(`/actors?kind=conversation&state=ended&project=${c.agentId}`);
  t.same(ended.body.data.map((a: { id: string }) => a.id), [mine], 'the index follows the journal');
  const page1 = await get(`/actors?kind=conversation&limit=1`);
  t.equal(page1.body.data.length, 1);
  t.type(page1.body.next, 'string');
  const page2 = await get(`/actors?kind=conversation&limit=1&cursor=${page1.body.next}`);
  t.not(page2.body.data[0].id, page1.body.data[0].id, 'pages by cursor');
  t.equal((await get('/actors?cursor=nonsense')).status, 400);
  t.equal((await get('/actors?limit=0')).status, 400);
});

t.test('the @statelyai/inspect feed over a real WebSocket: actor with definition, then events and snapshots, masked', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  const ws = new WebSocket(`${p.edge.replace('http', 'ws')}/admin/v1/inspector/actors/conversation/${id}/inspect`, { headers: auth() });
  const messages: any[] = [];
  const waiters: Array<() => void> = [];
  ws.on('message', (data) => {
    messages.push(JSON.parse(String(data)));
    for (const w of waiters.splice(0)) w();
  });
  const until = async (pred: (m: any) => boolean) => {
    for (;;) {
      const found = messages.find(pred);
      if (found) return found;
      await new Promise<void>((r) => waiters.push(r));
    }
  };
  const actor = await until((m) => m.type === '@xstate.actor');
  t.equal(actor.name, 'conversation');
  t.equal(actor.sessionId, `conversation/${id}`);
  t.equal(JSON.parse(actor.definition).id, 'conversation', 'the definition as JSON');
  t.ok(JSON.parse(actor.definition).states.idle, 'with its states');
  t.equal(actor.snapshot.value, 'idle');
  t.equal(typeof actor._version, 'string');
  t.equal(typeof actor.createdAt, 'string');
  await c.chat('respond', { conversation_id: id, message: 'write to dan@example.com please' });
  const snap = await until((m) => m.type === '@xstate.snapshot' && m.snapshot.value === 'idle' && m.snapshot.context);
  t.equal(snap.sessionId, `conversation/${id}`);
  t.type(snap.event.type, 'string');
  t.notMatch(JSON.stringify(messages), 'dan@example.com', 'masked like the page');
  ws.close();
  await new Promise((r) => ws.once('close', r));
});

t.test('SIGTERM with a stream and a feed open: both end, the process drains and exits 0', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  const sse = readSse(`${p.edge}/admin/v1/inspector/actors/conversation/${id}/events`, auth());
  await sse.next((e) => e.event === 'snapshot');
  const ws = new WebSocket(`${p.edge.replace('http', 'ws')}/admin/v1/inspector/actors/conversation/${id}/inspect`, { headers: auth() });
  await new Promise((r) => ws.once('message', r));
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  t.equal(await p.stop(), 0, 'exit 0');
  t.equal(await closed, 1001, 'the feed was closed as going away');
  await t.rejects(sse.next(), 'the stream ended');
});
