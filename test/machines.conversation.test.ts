import t, { type Test } from 'tap';
import { createActor, fromPromise } from 'xstate';
import { getShortestPaths, getSimplePaths } from 'xstate/graph';
import { attributesBytes, boundedUnread, conversationMachine, CONVERSATION_MAX_ATTRIBUTES_BYTES, CONVERSATION_MAX_TRANSCRIPT_BYTES, MAX_RECENT_CHARS, MAX_TIMEOUT_ROUNDS, MAX_UNREAD, MAX_UNREAD_CHARS, RECENT_MESSAGES, remember, transcriptBytes, turnBytes, turnInput, UNREAD_DROPPED, type ConversationStart, type ExternalEvent, type SideOutcome, type TurnOutcome, type TurnRecord } from '../machines/conversation.js';
import { conversationReply } from '../actors/conversation/kind.js';

const start: ConversationStart = {
  accountId: 'acc', projectId: 'p', environment: 'live', channel: 'CHAT', variantId: null, integrationAttributes: {},
  asrLangCode: '', ttsLangCode: '', initialMessage: null, fromNumber: '', toNumber: '', at: 1000, idleTimeoutMs: 60_000,
};
const outcome = (o: Partial<TurnOutcome> = {}): TurnOutcome => ({
  at: 2000, turns: [], response: 'ok', state: {}, handoff: null, end: false, oodTurns: 0, functionErrors: 0, variant: null, artifactVersion: 'a1', ...o,
});
const side = (o: Partial<SideOutcome> = {}): SideOutcome => ({
  at: 4000, turns: [], said: ['paid'], state: { paid: true }, handoff: null, end: false, functionErrors: 0, awaiting: null, ...o,
});
const external = (id = 'e1'): ExternalEvent => ({ id, content_type: 'application/json', body: '{}', data: {}, timed_out: false, received_at: null });
const wait = { eventId: 'e1', deadline: 9000 };
const never = <T>() => new Promise<T>(() => undefined);
// Effects never settle on their own here: the paths drive them with their done events.
const machine = conversationMachine.provide({
  actors: {
    startConversation: fromPromise(() => never<TurnOutcome>()),
    endConversation: fromPromise(() => never<{ at: number; state: Record<string, unknown>; functionErrors: number }>()),
    sleepUntil: fromPromise(() => never<number>()),
    watchExternalEvent: fromPromise(() => never<ExternalEvent | null>()),
    handleExternalEvent: fromPromise(() => never<SideOutcome>()),
    deliverExternal: fromPromise(() => never<boolean>()),
    handleBridgeEnded: fromPromise(() => never<SideOutcome>()),
  },
});
const coreEvents = [
  { type: 'START', start },
  { type: 'MESSAGE', message: 'hi', metadata: {}, integrationAttributes: {}, at: 1500 },
  { type: 'CLOSE', at: 1600 },
  { type: 'xstate.done.actor.start', output: outcome() },
  { type: 'xstate.done.actor.start', output: outcome({ end: true }) },
  { type: 'xstate.done.actor.start', output: outcome({ handoff: { destination: 'desk', reason: 'asked' } }) },
  { type: 'TURN_DONE', output: outcome() },
  { type: 'TURN_DONE', output: outcome({ end: true }) },
  { type: 'TURN_DONE', output: outcome({ handoff: { destination: 'desk', reason: 'asked' } }) },
  { type: 'xstate.done.actor.end', output: { at: 3000, state: {}, functionErrors: 0 } },
  { type: 'IDLE_TIMEOUT', at: 62_000 },
] as any[];
/** External events and bridge-ended: every state they add is reached and replayed by its shortest path. */
const events = [
  ...coreEvents,
  { type: 'TURN_DONE', output: outcome({ awaiting: wait }) },
  { type: 'EXTERNAL_EVENT', event: external('e1') },
  { type: 'EXTERNAL_EVENT', event: external('other') },
  { type: 'xstate.done.actor.externalTimer', output: 9000 },
  { type: 'xstate.done.actor.externalWatch', output: external('e1') },
  { type: 'xstate.done.actor.externalWatch', output: null },
  { type: 'xstate.done.actor.external', output: side() },
  { type: 'xstate.done.actor.external', output: side({ end: true }) },
  { type: 'xstate.done.actor.deliver', output: true },
  { type: 'BRIDGE_ENDED', bridge: { bridge_duration_seconds: 1, call_duration_seconds: 2 }, at: 5000 },
  { type: 'xstate.done.actor.bridge', output: side({ said: [] }) },
] as any[];
const serializeState = (s: any) =>
  JSON.stringify([s.value, s.context.endReason, !!s.context.awaiting, !!s.context.bridge.ended, s.context.handledEvents?.length ?? 0, !!s.context.bridge.pending, !!s.context.pending]);

const replay = (t: Test, paths: Array<{ steps: Array<{ event: any }>; state: { value: unknown } }>) => {
  for (const path of paths) {
    const actor = createActor(machine, { input: { id: 'c1' } });
    actor.start();
    for (const step of path.steps) actor.send(step.event as any);
    t.same(actor.getSnapshot().value, path.state.value, path.steps.map((s: any) => s.event.type.replace('xstate.done.actor.', 'done:')).join(' → ') || '(start)');
    actor.stop();
  }
};

t.test('conversation: the external-event and bridge states are reachable and their shortest paths replay', async (t) => {
  const shortest = getShortestPaths(machine, { events, serializeState, input: { id: 'c1' } } as any);
  const values = new Set(shortest.map((p) => (typeof p.state.value === 'string' ? p.state.value : JSON.stringify(p.state.value))));
  t.same([...values].sort(), ['bridging', 'delivering', 'ended', 'ending', 'externalResponding', 'handedOff', 'idle', 'new', 'responding', 'starting', '{"waiting":"checking"}', '{"waiting":"listening"}'].sort());
  replay(t, shortest as any);
});

t.test('conversation: every state is reachable and every simple path replays on a real actor', async (t) => {
  const shortest = getShortestPaths(machine, { events: coreEvents, serializeState, input: { id: 'c1' } } as any);
  const values = new Set(shortest.map((p) => p.state.value));
  t.same([...values].sort(), ['ended', 'ending', 'handedOff', 'idle', 'new', 'responding', 'starting']);
  const paths = getSimplePaths(machine, { events: coreEvents, serializeState, input: { id: 'c1' } } as any);
  t.ok(paths.length > 20, `${paths.length} simple paths`);
  replay(t, paths as any);
});

/** An actor with what it emits collected, and the answer the kind gives to each event sent (from the events since that send). */
const driven = (id: string) => {
  const actor = createActor(machine, { input: { id } });
  let emitted: Array<{ type: string; data: any }> = [];
  const all: Array<{ type: string; data: any }> = [];
  actor.on('*', (e: any) => {
    emitted.push(e);
    all.push(e);
  });
  actor.start();
  let last: any = null;
  return {
    actor,
    all,
    snap: () => actor.getSnapshot(),
    /** Sends an event; client events (not effects' outcomes) start a new step (what the host would commit as one entry). */
    send(e: any) {
      if (!e.type.startsWith('xstate.') && e.type !== 'TURN_DONE') {
        emitted = [];
        last = e;
      }
      actor.send(e);
    },
    /** The answer to the last client event, from the events emitted since it (as the host commits a step). */
    reply: () => conversationReply(actor.getSnapshot().value as string, actor.getSnapshot().context, last, emitted as any),
    types: () => emitted.map((e) => e.type),
  };
};
const turn = (user: string, agent: string, o: Partial<TurnRecord> = {}): TurnRecord => ({
  user_input: user, user_input_dtmf: '', user_input_datetime: '2026-01-01T00:00:01.000Z', barge_in: false, agent_response: agent,
  agent_response_datetime: '2026-01-01T00:00:02.000Z', latency: 1, translated_user_input: '', english_agent_response: '', intents: [], entities: {},
  is_ood: false, is_silence: false, metadata: {}, ...o,
});

t.test("conversation: a failed answer says its cause (contract 7.4's rows)", async (t) => {
  const c = driven('c-failed');
  c.send({ type: 'START', start });
  c.send({ type: 'xstate.done.actor.start', output: outcome({ response: 'Hello', turns: [turn('', 'Hello')] }) } as any);
  for (const failed of ['stream', 'respond'] as const) {
    c.send({ type: 'MESSAGE', message: 'q', metadata: {}, integrationAttributes: {}, at: 5 });
    c.send({ type: 'TURN_DONE', output: outcome({ failed, response: 'Sorry', turns: [turn('q', 'Sorry')] }) } as any);
    t.match(c.reply(), { ok: true, response: 'Sorry', failed }, failed);
    t.match(c.all.filter((e) => e.type === 'conversation.answered').at(-1), { data: { failed } }, `${failed}: journaled`);
  }
});

t.test('conversation: refusals and answers come from the step\'s events and state', async (t) => {
  const c = driven('c2');
  c.send({ type: 'MESSAGE', message: 'x', metadata: {}, integrationAttributes: {}, at: 1 });
  t.match(c.reply(), { ok: false, error: 'not_started' }, 'a message before start is refused');
  t.same(c.types(), [], 'and emits nothing');
  c.send({ type: 'START', start });
  c.send({ type: 'xstate.done.actor.start', output: outcome({ response: 'Hello', turns: [turn('', 'Hello')] }) } as any);
  t.equal(c.snap().value, 'idle');
  t.equal(c.snap().context.idleDeadline, 2000 + 60_000, 'idle deadline from the effect time');
  t.same(c.types(), ['conversation.started', 'conversation.turn', 'conversation.changed', 'conversation.answered']);
  t.match(c.reply(), { ok: true, response: 'Hello', end: false, handoff: null, state: 'idle' });
  t.notOk('outcome' in c.snap().context, 'no reply slot in the context');
  t.notOk('turns' in c.snap().context, 'no transcript in the context');
  c.send({ type: 'START', start });
  t.match(c.reply(), { ok: false, error: 'started' }, 'a second start is refused');
  c.send({ type: 'MESSAGE', message: 'q', metadata: { a: 1 }, integrationAttributes: { x: 1 }, at: 5 });
  t.same(c.snap().context.pending, { message: 'q', metadata: { a: 1 }, at: 5 });
  t.same(c.snap().context.integrationAttributes, { x: 1 }, 'later turns may add attributes');
  t.ok(c.snap().hasTag('busy'), 'responding is busy');
  t.ok(c.snap().hasTag('turn'), 'responding asks the host for the turn effect');
  t.match(turnInput(c.snap().context), { id: 'c2', message: 'q', metadata: { a: 1 }, at: 5, integrationAttributes: { x: 1 }, history: [{ role: 'agent', text: 'Hello' }] }, 'with the message and the history');
  c.send({ type: 'TURN_DONE', output: outcome({ handoff: { destination: 'desk', reason: 'asked' }, oodTurns: 1, response: 'Passing you on', turns: [turn('q', 'Passing you on', { is_ood: true })] }) } as any);
  t.equal(c.snap().value, 'handedOff');
  t.notOk(c.snap().hasTag('busy'), 'handed off is settled');
  t.equal(c.snap().context.counts.ood, 1);
  t.match(c.reply(), { ok: true, response: 'Passing you on', handoff: { destination: 'desk', reason: 'asked' } });
  const changed = c.all.filter((e) => e.type === 'conversation.changed').at(-1)!;
  t.match(changed.data, { account_id: 'acc', project_id: 'p', handoff: { destination: 'desk', reason: 'asked' }, num_ood: 1, integration_attributes: { x: 1 }, artifact_version: 'a1' });
  c.send({ type: 'MESSAGE', message: 'again', metadata: {}, integrationAttributes: {}, at: 6 });
  t.match(c.reply(), { ok: false, error: 'handed_off' });
  c.send({ type: 'CLOSE', at: 7 });
  c.send({ type: 'xstate.done.actor.end', output: { at: 8, state: { done: true }, functionErrors: 1 } } as any);
  t.equal(c.snap().value, 'ended');
  t.equal(c.snap().context.endReason, 'closed');
  t.equal(c.snap().context.endedAt, 8);
  t.same(c.types(), ['conversation.changed', 'conversation.ended']);
  t.match(c.all.at(-1)!.data, { account_id: 'acc', project_id: 'p', channel: 'CHAT', ended_at: new Date(8).toISOString(), reason: 'closed', crashed: false });
  t.match(c.reply(), { ok: true, end: true });
  c.send({ type: 'MESSAGE', message: 'late', metadata: {}, integrationAttributes: {}, at: 9 });
  t.match(c.reply(), { ok: false, error: 'ended' });
  const started = c.all.find((e) => e.type === 'conversation.started')!;
  t.same(started.data, {
    account_id: 'acc', project_id: 'p', channel: 'CHAT', environment: 'live', variant_id: null, from_number: '', to_number: '', started_at: new Date(1000).toISOString(),
    state: { from_: '', to: '', conversation_id: 'c2' },
  }, 'with the state it starts with: the built-in keys');
  const turns = c.all.filter((e) => e.type === 'conversation.turn');
  t.same(turns.map((e) => e.data.turn.agent_response), ['Hello', 'Passing you on'], 'every turn is an event');
  t.same(turns.map((e) => e.data.latency_ms), [1000, 1000]);
  c.actor.stop();
});

t.test('conversation: the snapshot keeps a bounded recent history, however long the conversation', async (t) => {
  const c = driven('c5');
  c.send({ type: 'START', start });
  c.send({ type: 'xstate.done.actor.start', output: outcome({ turns: [turn('', 'Hello')] }) } as any);
  const sizes: number[] = [];
  let inputs: any[] = [];
  for (let k = 1; k <= 200; k++) {
    c.send({ type: 'MESSAGE', message: `question ${k}`, metadata: {}, integrationAttributes: {}, at: 2000 + k });
    inputs = [(c.snap().children as any).turn?.getSnapshot?.()?.input].filter(Boolean);
    c.send({ type: 'TURN_DONE', output: outcome({ response: `answer ${k}`, turns: [turn(`question ${k}`, `answer ${k}`)] }) } as any);
    sizes.push(JSON.stringify(c.actor.getPersistedSnapshot()).length);
  }
  t.equal(c.snap().context.counts.turns, 201, 'every turn counted');
  t.equal(c.snap().context.recent.length, RECENT_MESSAGES, 'the last RECENT_MESSAGES messages');
  t.same(c.snap().context.recent.at(-1), { role: 'agent', text: 'answer 200' });
  t.same(c.snap().context.recent[0], { role: 'user', text: `question ${200 - RECENT_MESSAGES / 2 + 1}` });
  t.equal(sizes[199], sizes[149], 'the snapshot is as large after 200 turns as after 150');
  t.ok(sizes[199] < 4096, `and small (${sizes[199]} bytes)`);
  if (inputs[0]) t.equal(inputs[0].history.length, RECENT_MESSAGES, 'the responder gets the recent history');
  t.equal(c.all.filter((e) => e.type === 'conversation.turn').length, 201, 'the transcript is in the events');
  c.actor.stop();
});

t.test("conversation: a draft run pins the artifact an external_event or bridge_ended run found deployed, as a turn's; a pinned one stays", async (t) => {
  const run = (pinned: string | null, found: string | null) => {
    const actor = createActor(machine, { input: { id: 'c-pin' } });
    actor.start();
    actor.send({ type: 'START', start });
    actor.send({ type: 'xstate.done.actor.start', output: outcome({ artifactVersion: pinned }) } as any);
    actor.send({ type: 'MESSAGE', message: 'pay', metadata: {}, integrationAttributes: {}, at: 2500 });
    actor.send({ type: 'TURN_DONE', output: outcome({ artifactVersion: pinned, awaiting: wait }) } as any);
    actor.send({ type: 'xstate.done.actor.externalWatch', output: null } as any);
    actor.send({ type: 'EXTERNAL_EVENT', event: external('e1') });
    actor.send({ type: 'xstate.done.actor.external', output: side({ said: [], artifactVersion: found }) } as any);
    const afterExternal = actor.getSnapshot().context.artifactVersion;
    actor.send({ type: 'xstate.done.actor.deliver', output: false } as any);
    actor.send({ type: 'BRIDGE_ENDED', bridge: { bridge_duration_seconds: 3, call_duration_seconds: 4 }, at: 7000 });
    actor.send({ type: 'xstate.done.actor.bridge', output: side({ said: [] }) } as any);
    const afterBridge = actor.getSnapshot().context.artifactVersion;
    actor.stop();
    return [afterExternal, afterBridge];
  };
  t.same(run(null, 'art-7'), ['art-7', 'art-7'], 'a draft run: the deployment found is pinned, and an outcome with none keeps it');
  t.same(run(null, null), [null, null], 'nothing deployed still: nothing pinned');
  t.same(run('a1', 'art-7'), ['a1', 'a1'], 'a pinned conversation keeps its artifact');
});

t.test('conversation: the outcome that pins an artifact to a draft run says its variant, none too; a pinned one keeps its variant', async (t) => {
  const london = { id: 'v-lon', name: 'London' };
  const paris = { id: 'v-par', name: 'Paris' };
  const started = (pinned: string | null) => {
    const actor = createActor(machine, { input: { id: 'c-variant' } });
    actor.start();
    actor.send({ type: 'START', start });
    actor.send({ type: 'xstate.done.actor.start', output: outcome({ artifactVersion: pinned, variant: london }) } as any);
    actor.send({ type: 'MESSAGE', message: 'pay', metadata: {}, integrationAttributes: {}, at: 2500 });
    return actor;
  };
  const byTurn = (pinned: string | null, out: Partial<TurnOutcome>) => {
    const actor = started(pinned);
    actor.send({ type: 'TURN_DONE', output: outcome(out) } as any);
    const { variant } = actor.getSnapshot().context;
    actor.stop();
    return variant;
  };
  t.same(byTurn(null, { artifactVersion: 'art-7', variant: paris }), paris, 'a turn that pins: its variant');
  t.same(byTurn(null, { artifactVersion: 'art-7', variant: null }), null, 'none, when the artifact offers none');
  t.same(byTurn(null, { artifactVersion: null, variant: null }), london, 'still a draft run: the variant stays');
  t.same(byTurn('a1', { artifactVersion: 'a1', variant: null }), london, 'a pinned conversation keeps its variant');
  const bySide = (pinned: string | null, out: Partial<SideOutcome>) => {
    const actor = started(pinned);
    actor.send({ type: 'TURN_DONE', output: outcome({ artifactVersion: pinned, variant: london, awaiting: wait }) } as any);
    actor.send({ type: 'xstate.done.actor.externalWatch', output: null } as any);
    actor.send({ type: 'EXTERNAL_EVENT', event: external('e1') });
    actor.send({ type: 'xstate.done.actor.external', output: side({ said: [], ...out }) } as any);
    const { variant } = actor.getSnapshot().context;
    actor.stop();
    return variant;
  };
  t.same(bySide(null, { artifactVersion: 'art-7', variant: paris }), paris, 'a side run that pins: its variant');
  t.same(bySide(null, { artifactVersion: 'art-7', variant: null }), null, 'none too');
  t.same(bySide(null, { artifactVersion: 'art-7' }), london, 'an outcome that names none: the variant stays');
  t.same(bySide('a1', { artifactVersion: 'a1', variant: paris }), london, 'a pinned conversation keeps its variant');
});

t.test('conversation: an external event resumes a waiting conversation once; the timeout too; bridge-ended runs once', async (t) => {
  const actor = createActor(machine, { input: { id: 'c3' } });
  const answered: Array<{ type: string; data: any }> = [];
  actor.on('conversation.answered', (e: any) => void answered.push(e));
  actor.start();
  const snap = () => actor.getSnapshot();
  actor.send({ type: 'START', start });
  actor.send({ type: 'xstate.done.actor.start', output: outcome() } as any);
  actor.send({ type: 'MESSAGE', message: 'pay', metadata: {}, integrationAttributes: {}, at: 2500 });
  actor.send({ type: 'TURN_DONE', output: outcome({ awaiting: wait, response: 'Waiting' }) } as any);
  t.same(snap().value, { waiting: 'checking' }, 'it looks for an early event first');
  t.ok(snap().hasTag('busy'), 'within the step that started the wait: the next message finds an early event handled');
  t.same(snap().context.awaiting, wait, 'the wait and its absolute deadline are in the snapshot');
  t.same(Object.keys(snap().children).sort(), ['externalTimer', 'externalWatch'], 'a durable timer and the watch for an early event');
  actor.send({ type: 'xstate.done.actor.externalWatch', output: null } as any);
  t.same(snap().value, { waiting: 'listening' }, 'none came: it listens');
  t.notOk(snap().hasTag('busy'), 'and the step is over');
  actor.send({ type: 'EXTERNAL_EVENT', event: external('other') });
  t.same(snap().value, { waiting: 'listening' }, 'another id resumes nothing');
  actor.send({ type: 'EXTERNAL_EVENT', event: external('e1') });
  t.equal(snap().value, 'externalResponding');
  t.same(snap().context.handledEvents, ['e1']);
  t.equal(snap().context.awaiting, null);
  actor.send({ type: 'xstate.done.actor.external', output: side({ turns: [turn('', 'paid')] }) } as any);
  t.equal(snap().value, 'delivering');
  t.same(snap().context.unread, ['paid']);
  t.same(snap().context.state, { paid: true });
  actor.send({ type: 'xstate.done.actor.deliver', output: false } as any);
  t.equal(snap().value, 'idle', 'not delivered: back to idle, the words kept');
  t.same(snap().context.unread, ['paid']);
  actor.send({ type: 'EXTERNAL_EVENT', event: external('e1') });
  t.equal(snap().value, 'idle', 'a second delivery resumes nothing');
  actor.send({ type: 'MESSAGE', message: 'hi', metadata: {}, integrationAttributes: {}, at: 5000 });
  actor.send({ type: 'TURN_DONE', output: outcome({ response: 'Hello' }) } as any);
  t.equal(answered.at(-1)?.data.response, 'paid Hello', 'the next response starts with them');
  t.same(snap().context.unread, []);
  // The timeout.
  actor.send({ type: 'MESSAGE', message: 'pay', metadata: {}, integrationAttributes: {}, at: 6000 });
  actor.send({ type: 'TURN_DONE', output: outcome({ awaiting: { eventId: 'e2', deadline: 9000 } }) } as any);
  actor.send({ type: 'xstate.done.actor.externalTimer', output: 9000 } as any);
  t.equal(snap().value, 'externalResponding');
  t.match(snap().context.external, { id: 'e2', timed_out: true });
  actor.send({ type: 'xstate.done.actor.external', output: side({ said: [] }) } as any);
  actor.send({ type: 'xstate.done.actor.deliver', output: false } as any);
  t.equal(snap().value, 'idle');
  // Bridge-ended: once.
  actor.send({ type: 'BRIDGE_ENDED', bridge: { bridge_duration_seconds: 3, call_duration_seconds: 4 }, at: 7000 });
  t.equal(snap().value, 'bridging');
  actor.send({ type: 'xstate.done.actor.bridge', output: side({ said: [], state: { b: 1 } }) } as any);
  t.equal(snap().value, 'idle');
  t.match(snap().context.bridge.ended, { bridge_duration_seconds: 3, call_duration_seconds: 4, at: String });
  actor.send({ type: 'BRIDGE_ENDED', bridge: { bridge_duration_seconds: 9, call_duration_seconds: 9 }, at: 8000 });
  t.equal(snap().value, 'idle', 'a second notification runs nothing');
  t.equal(snap().context.bridge.ended!.bridge_duration_seconds, 3);
  // A bridge notification while waiting leaves the wait as it was.
  const b = createActor(machine, { input: { id: 'c4' } });
  b.start();
  b.send({ type: 'START', start });
  b.send({ type: 'xstate.done.actor.start', output: outcome({ awaiting: wait }) } as any);
  t.same(b.getSnapshot().value, { waiting: 'checking' });
  b.send({ type: 'xstate.done.actor.externalWatch', output: null } as any);
  b.send({ type: 'BRIDGE_ENDED', bridge: { bridge_duration_seconds: 1, call_duration_seconds: 2 }, at: 3000 });
  b.send({ type: 'xstate.done.actor.bridge', output: side({ said: [] }) } as any);
  t.same(b.getSnapshot().value, { waiting: 'checking' }, 'back to waiting (the wait looked for again: an event may have come meanwhile)');
  t.same(b.getSnapshot().context.awaiting, wait, 'the same wait and deadline');
  b.send({ type: 'xstate.done.actor.bridge', output: side({ end: true }) } as any);
  b.send({ type: 'CLOSE', at: 4000 });
  t.equal(b.getSnapshot().value, 'ending', 'a close while waiting ends it');
  t.equal(b.getSnapshot().context.awaiting, null);
  b.stop();
  actor.stop();
});

t.test('conversation: the idle timeout ends an idle or handed-off conversation only once its deadline has passed', async (t) => {
  const c = driven('c-idle');
  c.send({ type: 'START', start });
  c.send({ type: 'xstate.done.actor.start', output: outcome() } as any);
  t.ok(c.snap().hasTag('expires'), 'idle expires: the host keeps its deadline');
  c.send({ type: 'IDLE_TIMEOUT', at: 61_999 });
  t.equal(c.snap().value, 'idle', 'a timeout before the deadline (a turn moved it on meanwhile) changes nothing');
  t.same(c.types(), []);
  c.send({ type: 'MESSAGE', message: 'hi', metadata: {}, integrationAttributes: {}, at: 61_000 });
  t.notOk(c.snap().hasTag('expires'), 'a turn in progress does not expire');
  c.send({ type: 'IDLE_TIMEOUT', at: 70_000 });
  t.equal(c.snap().value, 'responding', 'nor does a timeout during a turn end it');
  c.send({ type: 'TURN_DONE', output: outcome({ at: 65_000 }) } as any);
  c.send({ type: 'IDLE_TIMEOUT', at: 124_999 });
  t.equal(c.snap().value, 'idle', 'the deadline moved on with the turn');
  c.send({ type: 'IDLE_TIMEOUT', at: 125_000 });
  t.equal(c.snap().value, 'ending');
  t.equal(c.snap().context.endReason, 'idle');

  const h = driven('c-handoff');
  h.send({ type: 'START', start });
  h.send({ type: 'xstate.done.actor.start', output: outcome({ handoff: { destination: 'desk', reason: 'asked' } }) } as any);
  t.equal(h.snap().value, 'handedOff');
  t.ok(h.snap().hasTag('expires'));
  h.send({ type: 'IDLE_TIMEOUT', at: 62_000 });
  t.match([h.snap().value, h.snap().context.endReason], ['ending', 'idle'], 'a handed-off conversation ends once idle too');
});

/** Drives a conversation's effects to their end (each with a plain outcome) until it is settled: what the host's step waits for. */
const settle = (c: ReturnType<typeof driven>) => {
  const doneOf: Record<string, any> = {
    starting: { type: 'xstate.done.actor.start', output: outcome() },
    externalResponding: { type: 'xstate.done.actor.external', output: side({ said: ['side words'] }) },
    delivering: { type: 'xstate.done.actor.deliver', output: false },
    bridging: { type: 'xstate.done.actor.bridge', output: side({ said: [] }) },
    responding: { type: 'TURN_DONE', output: outcome({ response: 'answer', turns: [turn('q', 'answer')] }) },
    ending: { type: 'xstate.done.actor.end', output: { at: 9500, state: {}, functionErrors: 0 } },
    waiting: { type: 'xstate.done.actor.externalWatch', output: null },
  };
  for (let i = 0; i < 20 && c.snap().hasTag('busy'); i++) {
    const v = c.snap().value;
    c.send(doneOf[typeof v === 'string' ? v : Object.keys(v as object)[0]]);
  }
};

t.test('conversation: a close, a message or a bridge notification while a side function runs is taken once it is done, on every path there', async (t) => {
  // Every way into the states where an external event's or a bridge's function runs or its words are delivered:
  // the host runs these on the wait's timer, not behind an event, so whatever a client sends meanwhile reaches them.
  const paths = (getShortestPaths(machine, { events, serializeState, input: { id: 'c1' } } as any) as any[]).filter((p) => ['externalResponding', 'delivering', 'bridging'].includes(p.state.value));
  t.ok(paths.length >= 6, `${paths.length} paths into externalResponding, delivering and bridging`);
  const message = { type: 'MESSAGE', message: 'meanwhile', metadata: {}, integrationAttributes: {}, at: 8000 };
  const bridge = { type: 'BRIDGE_ENDED', bridge: { bridge_duration_seconds: 7, call_duration_seconds: 8 }, at: 8000 };
  let checked = 0;
  for (const path of paths) {
    const name = path.steps.map((s: any) => s.event.type.replace('xstate.done.actor.', 'done:')).join(' → ');
    for (const event of [{ type: 'CLOSE', at: 8000 }, message, bridge]) {
      const c = driven('c-side');
      for (const step of path.steps) c.send(step.event);
      const before = c.snap();
      const ctx = before.context;
      const live = ctx.endedAt === null && ctx.endReason === null && ctx.handoff === null;
      c.send(event);
      settle(c);
      const after = c.snap();
      const what = `${name} + ${event.type}`;
      t.notOk(after.hasTag('busy'), `${what}: settles`);
      if (event.type === 'CLOSE' && ctx.endedAt === null && ctx.endReason === null) {
        t.equal(after.value, 'ended', `${what}: the close is applied once the function is done`);
        t.equal(after.context.endReason, 'closed', `${what}: closed by the client`);
        t.equal(after.context.awaiting, null, `${what}: no wait outlives it`);
        t.match(c.reply(), { ok: true, end: true }, `${what}: and answered so`);
        checked++;
      } else if (event.type === 'MESSAGE' && live) {
        const reply = c.reply() as any;
        t.match(reply, { ok: true, response: /answer$/ }, `${what}: the message is taken as a turn, answered`);
        if (before.value === 'externalResponding') t.match(reply.response, /side words answer$/, `${what}: after what the function said`);
        t.equal(after.context.pending, null, `${what}: nothing left pending`);
        checked++;
      } else if (event.type === 'BRIDGE_ENDED' && before.value !== 'bridging' && ctx.bridge.ended === null && ctx.bridge.pending === null) {
        t.match(after.context.bridge.ended, { bridge_duration_seconds: 7, call_duration_seconds: 8 }, `${what}: bridge_ended runs once the function is done`);
        t.match(c.reply(), { ok: true, bridge_ended: { bridge_duration_seconds: 7 } }, `${what}: and answered with it`);
        t.equal(after.context.bridge.pending, null);
        checked++;
      } else if (event.type === 'MESSAGE') {
        t.match(c.reply(), { ok: false, error: ctx.handoff !== null && ctx.endedAt === null && ctx.endReason === null ? 'handed_off' : 'ended' }, `${what}: refused as the state says`);
        t.equal(after.context.pending, null, `${what}: and not kept`);
      }
      c.actor.stop();
    }
  }
  t.ok(checked >= paths.length, `${checked} events taken`);
});

t.test('conversation: a message kept while external_event runs is refused once the function ended or handed off the conversation', async (t) => {
  for (const [o, error] of [[{ end: true }, 'ended'], [{ handoff: { destination: 'desk', reason: 'asked' } }, 'handed_off']] as const) {
    const c = driven('c-refused');
    c.send({ type: 'START', start });
    c.send({ type: 'xstate.done.actor.start', output: outcome({ awaiting: wait }) });
    c.send({ type: 'xstate.done.actor.externalWatch', output: null });
    c.send({ type: 'xstate.done.actor.externalTimer', output: 9000 });
    t.equal(c.snap().value, 'externalResponding');
    c.send({ type: 'MESSAGE', message: 'meanwhile', metadata: {}, integrationAttributes: {}, at: 8000 });
    c.send({ type: 'xstate.done.actor.external', output: side(o) });
    settle(c);
    t.match(c.reply(), { ok: false, error }, error);
    t.equal(c.snap().context.pending, null);
    t.equal(c.types().includes('conversation.answered'), false, 'no turn ran');
  }
});

t.test('conversation: a wait renewed only by its own timeouts is renewed MAX_TIMEOUT_ROUNDS times, then refused', async (t) => {
  const c = driven('c-chain');
  c.send({ type: 'START', start });
  c.send({ type: 'xstate.done.actor.start', output: outcome({ awaiting: { eventId: 'e0', deadline: 3000 } }) });
  c.send({ type: 'xstate.done.actor.externalWatch', output: null });
  /** One round: the deadline passes, external_event says something and waits again. */
  const round = (n: number) => {
    c.send({ type: 'xstate.done.actor.externalTimer', output: 0 });
    c.send({ type: 'xstate.done.actor.external', output: side({ said: [`round ${n}`], awaiting: { eventId: `e${n}`, deadline: 3000 + n } }) });
    c.send({ type: 'xstate.done.actor.deliver', output: false });
    if (c.snap().hasTag('busy')) c.send({ type: 'xstate.done.actor.externalWatch', output: null });
  };
  for (let n = 1; n <= 5; n++) round(n);
  t.equal(c.snap().context.counts.timeoutRounds, 5);
  // A client message starts the count again; so does an external event.
  c.send({ type: 'MESSAGE', message: 'hi', metadata: {}, integrationAttributes: {}, at: 5000 });
  c.send({ type: 'TURN_DONE', output: outcome({ response: 'Hello' }) });
  t.equal(c.snap().context.counts.timeoutRounds, 0, 'a message resets the chain');
  c.send({ type: 'xstate.done.actor.externalWatch', output: null });
  for (let n = 6; n <= 8; n++) round(n);
  c.send({ type: 'EXTERNAL_EVENT', event: external('e8') });
  t.equal(c.snap().context.counts.timeoutRounds, 0, 'an external event resets the chain');
  c.send({ type: 'xstate.done.actor.external', output: side({ said: [], awaiting: { eventId: 'e9', deadline: 3009 } }) });
  c.send({ type: 'xstate.done.actor.deliver', output: false });
  c.send({ type: 'xstate.done.actor.externalWatch', output: null });
  for (let n = 1; n < MAX_TIMEOUT_ROUNDS; n++) round(100 + n);
  t.same(c.snap().value, { waiting: 'listening' }, `${MAX_TIMEOUT_ROUNDS - 1} rounds: still renewed`);
  const errors = c.snap().context.counts.functionErrors;
  round(200);
  t.equal(c.snap().value, 'idle', `the wait asked for in round ${MAX_TIMEOUT_ROUNDS} is refused`);
  t.equal(c.snap().context.awaiting, null);
  t.equal(c.snap().context.counts.functionErrors, errors + 1, 'counted as a function error');
  t.match(c.all.filter((e) => e.type === 'conversation.changed').at(-1)!.data, { awaiting_external_event: null, function_errors: errors + 1 });
  c.actor.stop();
});

t.test('conversation: the recent history holds at most MAX_RECENT_CHARS characters, the newest messages, a longer one cut', async (t) => {
  const big = (c: string) => c.repeat(12 * 1024);
  const recent = remember([], [turn(big('a'), big('b')), turn(big('c'), big('d'))]);
  t.same(recent.map((m) => [m.role, m.text[0]]), [['user', 'c'], ['agent', 'd']], 'the newest messages that fit');
  t.ok(recent.reduce((n, m) => n + m.text.length, 0) <= MAX_RECENT_CHARS);
  const huge = remember([{ role: 'user', text: 'hi' }], [turn('', 'z'.repeat(300_000))]);
  t.equal(huge.length, 1, 'one message over the bound: cut, the older dropped');
  t.ok(huge[0].text.length <= MAX_RECENT_CHARS && huge[0].text.endsWith('…') && huge[0].text.startsWith('zzz'), 'its start kept, ending …');
  t.same(remember([{ role: 'user', text: 'hi' }], [turn('there', 'hello')]).map((m) => m.text), ['hi', 'there', 'hello'], 'short ones as they are');

  // Through the machine: a function that answers 256 KiB at every turn keeps the snapshot small.
  const c = driven('c-recent');
  c.send({ type: 'START', start });
  c.send({ type: 'xstate.done.actor.start', output: outcome({ turns: [turn('', 'Hello')] }) } as any);
  for (let k = 1; k <= 5; k++) {
    c.send({ type: 'MESSAGE', message: `question ${k}`, metadata: {}, integrationAttributes: {}, at: 2000 + k });
    c.send({ type: 'TURN_DONE', output: outcome({ response: 'x', turns: [turn(`question ${k}`, 'w'.repeat(256 * 1024))] }) } as any);
  }
  t.ok(JSON.stringify(c.actor.getPersistedSnapshot()).length < MAX_RECENT_CHARS + 4096, 'the snapshot stays within the bound');
  c.actor.stop();
});

t.test('conversation: unread keeps at most MAX_UNREAD texts and MAX_UNREAD_CHARS characters, the newest, marked', async (t) => {
  t.same(boundedUnread([], ['a', 'b']), ['a', 'b'], 'within the bounds: as said');
  const many = Array.from({ length: 20 }, (_, i) => `t${i}`);
  const kept = boundedUnread([], many);
  t.equal(kept.length, MAX_UNREAD);
  t.same(kept, [UNREAD_DROPPED, ...many.slice(-(MAX_UNREAD - 1))], 'the oldest dropped, the marker first');
  t.same(boundedUnread(kept, ['t20']), [UNREAD_DROPPED, ...many.slice(-(MAX_UNREAD - 2)), 't20'], 'one marker however often it drops');
  const big = boundedUnread([], ['a'.repeat(6000), 'b'.repeat(6000), 'c'.repeat(6000)]);
  t.same(big.map((x) => x[0]), [UNREAD_DROPPED, 'b', 'c'], 'by characters too');
  t.ok(big.join('').length <= MAX_UNREAD_CHARS);
  const huge = boundedUnread(['xx'], ['y'.repeat(200_000)]);
  t.equal(huge.length, 2, 'one text over the bound is cut, the older one dropped');
  t.equal(huge[0], UNREAD_DROPPED);
  t.ok(huge.join('').length <= MAX_UNREAD_CHARS && huge[1].endsWith('…'), 'cut to the bound, ending …');

  // Through the machine: 40 rounds of 2000 characters each, never read; the snapshot stays small.
  const c = driven('c-unread');
  c.send({ type: 'START', start });
  c.send({ type: 'xstate.done.actor.start', output: outcome({ awaiting: { eventId: 'e0', deadline: 3000 } }) });
  c.send({ type: 'xstate.done.actor.externalWatch', output: null });
  const sizes: number[] = [];
  for (let n = 1; n <= 40; n++) {
    c.send({ type: 'EXTERNAL_EVENT', event: external(`e${n - 1}`) });
    const said = `${n}:${'w'.repeat(2000)}`;
    c.send({ type: 'xstate.done.actor.external', output: side({ said: [said], turns: [turn('', said)], awaiting: { eventId: `e${n}`, deadline: 3000 } }) });
    c.send({ type: 'xstate.done.actor.deliver', output: false });
    c.send({ type: 'xstate.done.actor.externalWatch', output: null });
    sizes.push(JSON.stringify(c.actor.getPersistedSnapshot()).length);
  }
  t.ok(c.snap().context.unread.length <= MAX_UNREAD);
  // Ids and counters gain digits; no text is added (each round's 2000 characters is kept in place of an older one).
  t.ok(sizes[39] - sizes[29] < 2000, `the snapshot stops growing by what was said (${sizes[29]}, then ${sizes[39]} bytes)`);
  c.send({ type: 'MESSAGE', message: 'hi', metadata: {}, integrationAttributes: {}, at: 5000 });
  c.send({ type: 'TURN_DONE', output: outcome({ response: 'Hello' }) });
  const response = c.all.filter((e) => e.type === 'conversation.answered').at(-1)!.data.response as string;
  t.match(response, new RegExp(`^… ${40 - MAX_UNREAD + 2}:w+ `), 'the next response starts with the marker, then the newest words kept');
  t.match(response, /40:w+ Hello$/);
  t.equal(c.all.filter((e) => e.type === 'conversation.turn' && e.data.turn.user_input === '').length >= 40, true, 'every word is in the transcript');
  c.actor.stop();
});

t.test('conversation: the transcript is counted in the context, and a full one ends with the turn that filled it', async (t) => {
  t.equal(CONVERSATION_MAX_TRANSCRIPT_BYTES, 8 * 1024 * 1024, 'the default limit, 8 MiB');
  // Bytes of UTF-8 ('中' is three), and a message's metadata as JSON only when it has any.
  t.equal(turnBytes(turn('中', 'ab')), 5);
  t.equal(turnBytes(turn('q', 'a', { metadata: { k: 'v' } })), 2 + JSON.stringify({ k: 'v' }).length);

  const c = driven('c-transcript');
  c.send({ type: 'START', start });
  t.equal(c.snap().context.counts.transcriptBytes, 0, 'none before the first turn');
  const opening = turn('', 'Hello');
  c.send({ type: 'xstate.done.actor.start', output: outcome({ response: 'Hello', turns: [opening] }) });
  t.equal(c.snap().context.counts.transcriptBytes, 5, "the start's turns count");
  c.send({ type: 'MESSAGE', message: 'q', metadata: { k: 'v' }, integrationAttributes: {}, at: 2500 });
  t.equal(turnInput(c.snap().context).transcriptBytes, 5, 'the turn effect is told what the transcript holds');
  const asked = turn('q', '中'.repeat(100), { metadata: { k: 'v' } });
  c.send({ type: 'TURN_DONE', output: outcome({ response: asked.agent_response, turns: [asked] }) });
  t.equal(c.snap().context.counts.transcriptBytes, 5 + turnBytes(asked), "a turn's texts and metadata count");

  // What an external event's function said is a turn of the transcript too.
  c.send({ type: 'MESSAGE', message: 'pay', metadata: {}, integrationAttributes: {}, at: 2600 });
  c.send({ type: 'TURN_DONE', output: outcome({ awaiting: wait, response: 'Waiting', turns: [turn('pay', 'Waiting')] }) });
  c.send({ type: 'xstate.done.actor.externalWatch', output: null });
  c.send({ type: 'EXTERNAL_EVENT', event: external('e1') });
  const before = c.snap().context.counts.transcriptBytes;
  c.send({ type: 'xstate.done.actor.external', output: side({ said: ['paid'], turns: [turn('', 'paid', { metadata: { external_event_id: 'e1' } })] }) });
  c.send({ type: 'xstate.done.actor.deliver', output: false });
  t.equal(c.snap().value, 'idle');
  t.equal(c.snap().context.counts.transcriptBytes, before + 4 + JSON.stringify({ external_event_id: 'e1' }).length, "a side function's turn counts");

  // A snapshot from before the count (its counts without it) counts from 0, and the count survives a restore.
  const persisted = JSON.parse(JSON.stringify(c.actor.getPersistedSnapshot()));
  const restored = createActor(machine, { snapshot: persisted, input: { id: 'c-transcript' } });
  restored.start();
  t.equal(restored.getSnapshot().context.counts.transcriptBytes, c.snap().context.counts.transcriptBytes, 'the count is in the snapshot');
  restored.stop();
  delete persisted.context.counts.transcriptBytes;
  const old = createActor(machine, { snapshot: persisted, input: { id: 'c-transcript' } });
  old.start();
  old.send({ type: 'MESSAGE', message: 'hi', metadata: {}, integrationAttributes: {}, at: 2700 });
  t.equal(turnInput(old.getSnapshot().context).transcriptBytes, 0, 'an older snapshot tells the effect 0');
  old.send({ type: 'TURN_DONE', output: outcome({ response: 'Hello', turns: [turn('hi', 'Hello')] }) });
  t.equal(old.getSnapshot().context.counts.transcriptBytes, 7, 'and counts from 0');
  old.stop();

  // The turn that fills the transcript (the effect says so: `full`) is answered and ends the conversation.
  c.send({ type: 'MESSAGE', message: 'more', metadata: {}, integrationAttributes: {}, at: 3000 });
  c.send({ type: 'TURN_DONE', output: outcome({ response: 'Noted', turns: [turn('more', 'Noted')], full: true }) });
  t.equal(c.snap().value, 'ending', 'a full conversation ends');
  t.equal(c.snap().context.endReason, 'full', 'its end reason says why');
  t.match(c.reply(), { ok: true, response: 'Noted', end: true }, 'the turn is answered, and the answer says the conversation ends');
  t.match(c.all.filter((e) => e.type === 'conversation.changed').at(-1)!.data, { end_reason: 'full' });
  c.send({ type: 'xstate.done.actor.end', output: { at: 3100, state: {}, functionErrors: 0 } });
  t.equal(c.snap().value, 'ended');
  t.match(c.all.at(-1), { type: 'conversation.ended', data: { reason: 'full' } });
  c.send({ type: 'MESSAGE', message: 'late', metadata: {}, integrationAttributes: {}, at: 3200 });
  t.match(c.reply(), { ok: false, error: 'ended' }, 'a later message is refused as to any ended conversation');
  c.actor.stop();

  // The agent's own end says `agent`, even when the transcript is full too.
  const d = driven('c-transcript-agent');
  d.send({ type: 'START', start });
  d.send({ type: 'xstate.done.actor.start', output: outcome({ end: true, full: true }) });
  t.equal(d.snap().context.endReason, 'agent');
  d.actor.stop();
});

t.test("conversation: the keys a caller pressed count in the transcript", async (t) => {
  // A keyed turn records the digits in `user_input_dtmf` and leaves `user_input` empty: they counted for nothing.
  t.equal(turnBytes(turn('', 'ok', { user_input_dtmf: '1234#' })), 2 + 5, "the digits count with the turn's texts");
  t.equal(transcriptBytes('', 'ok', {}, '1234#'), 7);
  const c = driven('c-dtmf');
  c.send({ type: 'START', start: { ...start, channel: 'VOICE-SIP' } });
  c.send({ type: 'xstate.done.actor.start', output: outcome({ response: '', turns: [] }) });
  c.send({ type: 'MESSAGE', message: '', metadata: {}, integrationAttributes: {}, voice: { dtmf: '4'.repeat(20) }, at: 2500 });
  c.send({ type: 'TURN_DONE', output: outcome({ response: 'Got it', turns: [turn('', 'Got it', { user_input_dtmf: '4'.repeat(20) })] }) });
  t.equal(c.snap().context.counts.transcriptBytes, 6 + 20, 'a keyed turn adds its digits to the count');
  c.actor.stop();
});

t.test('conversation: a message whose integration attributes would take the merged ones past the bound is refused whole', async (t) => {
  t.equal(CONVERSATION_MAX_ATTRIBUTES_BYTES, 64 * 1024, 'the default bound, 64 KiB');
  const LIMIT = 4096;
  const c = driven('c-attributes');
  c.send({ type: 'START', start: { ...start, integrationAttributes: { a: 'x'.repeat(3000) } } });
  c.send({ type: 'xstate.done.actor.start', output: outcome({ response: 'Hello', turns: [turn('', 'Hello')] }) });
  const message = (integrationAttributes: Record<string, unknown>, at: number) => ({ type: 'MESSAGE', message: 'q', metadata: {}, integrationAttributes, maxAttributesBytes: LIMIT, at });
  const before = JSON.stringify(c.snap().context);

  // 3000 characters more beside the 3000 there: each fits alone, the merge does not.
  c.send(message({ b: 'y'.repeat(3000) }, 2500));
  t.equal(c.snap().value, 'idle', 'no turn is taken');
  t.match(c.reply(), { ok: false, error: 'attributes_too_large' }, 'the reply says why');
  t.same(c.types(), [], 'nothing is emitted');
  t.equal(JSON.stringify(c.snap().context), before, 'the context is as it was');
  t.equal(attributesBytes({ a: 'x'.repeat(3000), b: 'y'.repeat(3000) }) > LIMIT, true);

  // Without attributes, or with some that fit once merged (a key replaced counts once), a message is taken.
  c.send(message({}, 2600));
  t.equal(c.snap().value, 'responding', 'a message without attributes is taken');
  c.send({ type: 'TURN_DONE', output: outcome({ response: 'ok', turns: [turn('q', 'ok')] }) });
  c.send(message({ a: 'z'.repeat(3500), c: 1 }, 2700));
  t.equal(c.snap().value, 'responding', 'a message whose attributes fit once merged is taken');
  t.same(c.snap().context.integrationAttributes, { a: 'z'.repeat(3500), c: 1 }, 'and merged');
  c.send({ type: 'TURN_DONE', output: outcome({ response: 'ok', turns: [turn('q', 'ok')] }) });
  t.match(c.reply(), { ok: true, response: 'ok' });
  t.same(c.all.filter((e) => e.type === 'conversation.changed').at(-1)!.data.integration_attributes, { a: 'z'.repeat(3500), c: 1 }, 'the record is told the merge');

  // Also while an external event's function runs (the message would be kept for later): refused at once.
  c.send({ type: 'MESSAGE', message: 'pay', metadata: {}, integrationAttributes: {}, at: 2800 });
  c.send({ type: 'TURN_DONE', output: outcome({ awaiting: wait, response: 'Waiting', turns: [turn('pay', 'Waiting')] }) });
  c.send({ type: 'xstate.done.actor.externalWatch', output: null });
  c.send({ type: 'EXTERNAL_EVENT', event: external('e1') });
  t.equal(c.snap().value, 'externalResponding');
  c.send(message({ d: 'w'.repeat(1000) }, 2900));
  t.equal(c.snap().context.pending, null, 'not kept');
  c.send({ type: 'xstate.done.actor.external', output: side({ said: [] }) });
  c.send({ type: 'xstate.done.actor.deliver', output: false });
  t.equal(c.snap().value, 'idle', 'no turn follows');
  t.match(c.reply(), { ok: false, error: 'attributes_too_large' });
  t.notOk('d' in c.snap().context.integrationAttributes);
  c.actor.stop();
});
