import t, { type Test } from 'tap';
import { createActor, fromPromise } from 'xstate';
import { getShortestPaths, getSimplePaths } from 'xstate/graph';
import { conversationMachine, type ConversationStart, type ExternalEvent, type SideOutcome, type TurnOutcome } from '../machines/conversation.js';

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
    takeTurn: fromPromise(() => never<TurnOutcome>()),
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
  { type: 'xstate.done.actor.turn', output: outcome() },
  { type: 'xstate.done.actor.turn', output: outcome({ end: true }) },
  { type: 'xstate.done.actor.turn', output: outcome({ handoff: { destination: 'desk', reason: 'asked' } }) },
  { type: 'xstate.done.actor.end', output: { at: 3000, state: {}, functionErrors: 0 } },
  { type: 'xstate.done.actor.idleTimer', output: 62_000 },
] as any[];
/** External events and bridge-ended: every state they add is reached and replayed by its shortest path. */
const events = [
  ...coreEvents,
  { type: 'xstate.done.actor.turn', output: outcome({ awaiting: wait }) },
  { type: 'EXTERNAL_EVENT', event: external('e1') },
  { type: 'EXTERNAL_EVENT', event: external('other') },
  { type: 'xstate.done.actor.externalTimer', output: 9000 },
  { type: 'xstate.done.actor.externalWatch', output: external('e1') },
  { type: 'xstate.done.actor.external', output: side() },
  { type: 'xstate.done.actor.external', output: side({ end: true }) },
  { type: 'xstate.done.actor.deliver', output: true },
  { type: 'BRIDGE_ENDED', bridge: { bridge_duration_seconds: 1, call_duration_seconds: 2 }, at: 5000 },
  { type: 'xstate.done.actor.bridge', output: side({ said: [] }) },
] as any[];
const serializeState = (s: any) =>
  JSON.stringify([s.value, s.context.outcome?.ok ?? null, s.context.endReason, !!s.context.awaiting, !!s.context.bridgeEnded, s.context.handledEvents?.length ?? 0]);

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
  const values = new Set(shortest.map((p) => p.state.value));
  t.same([...values].sort(), ['bridging', 'delivering', 'ended', 'ending', 'externalResponding', 'handedOff', 'idle', 'new', 'responding', 'starting', 'waiting']);
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

t.test('conversation: refusals and outcomes', async (t) => {
  const actor = createActor(machine, { input: { id: 'c2' } });
  actor.start();
  actor.send({ type: 'MESSAGE', message: 'x', metadata: {}, integrationAttributes: {}, at: 1 });
  t.same(actor.getSnapshot().context.outcome, { ok: false, error: 'not_started' }, 'a message before start is refused');
  actor.send({ type: 'START', start });
  actor.send({ type: 'xstate.done.actor.start', output: outcome({ response: 'Hello', turns: [{ user_input: '', agent_response: 'Hello' } as any] }) } as any);
  t.equal(actor.getSnapshot().value, 'idle');
  t.equal(actor.getSnapshot().context.idleDeadline, 2000 + 60_000, 'idle deadline from the effect time');
  t.same(actor.getSnapshot().context.outcome, { ok: true, response: 'Hello', end: false, handoff: null });
  actor.send({ type: 'START', start });
  t.same(actor.getSnapshot().context.outcome, { ok: false, error: 'started' }, 'a second start is refused');
  actor.send({ type: 'MESSAGE', message: 'q', metadata: { a: 1 }, integrationAttributes: { x: 1 }, at: 5 });
  t.same(actor.getSnapshot().context.pending, { message: 'q', metadata: { a: 1 }, at: 5 });
  t.same(actor.getSnapshot().context.integrationAttributes, { x: 1 }, 'later turns may add attributes');
  actor.send({ type: 'xstate.done.actor.turn', output: outcome({ handoff: { destination: 'desk', reason: 'asked' }, oodTurns: 1 }) } as any);
  t.equal(actor.getSnapshot().value, 'handedOff');
  t.equal(actor.getSnapshot().context.numOod, 1);
  actor.send({ type: 'MESSAGE', message: 'again', metadata: {}, integrationAttributes: {}, at: 6 });
  t.same(actor.getSnapshot().context.outcome, { ok: false, error: 'handed_off' });
  actor.send({ type: 'CLOSE', at: 7 });
  actor.send({ type: 'xstate.done.actor.end', output: { at: 8, state: { done: true }, functionErrors: 1 } } as any);
  t.equal(actor.getSnapshot().value, 'ended');
  t.equal(actor.getSnapshot().context.endReason, 'closed');
  t.equal(actor.getSnapshot().context.endedAt, 8);
  actor.send({ type: 'MESSAGE', message: 'late', metadata: {}, integrationAttributes: {}, at: 9 });
  t.same(actor.getSnapshot().context.outcome, { ok: false, error: 'ended' });
  actor.stop();
});

t.test('conversation: an external event resumes a waiting conversation once; the timeout too; bridge-ended runs once', async (t) => {
  const actor = createActor(machine, { input: { id: 'c3' } });
  actor.start();
  const snap = () => actor.getSnapshot();
  actor.send({ type: 'START', start });
  actor.send({ type: 'xstate.done.actor.start', output: outcome() } as any);
  actor.send({ type: 'MESSAGE', message: 'pay', metadata: {}, integrationAttributes: {}, at: 2500 });
  actor.send({ type: 'xstate.done.actor.turn', output: outcome({ awaiting: wait, response: 'Waiting' }) } as any);
  t.equal(snap().value, 'waiting');
  t.same(snap().context.awaiting, wait, 'the wait and its absolute deadline are in the snapshot');
  t.same(Object.keys(snap().children).sort(), ['externalTimer', 'externalWatch'], 'a durable timer and the watch for an early event');
  actor.send({ type: 'EXTERNAL_EVENT', event: external('other') });
  t.equal(snap().value, 'waiting', 'another id resumes nothing');
  actor.send({ type: 'EXTERNAL_EVENT', event: external('e1') });
  t.equal(snap().value, 'externalResponding');
  t.same(snap().context.handledEvents, ['e1']);
  t.equal(snap().context.awaiting, null);
  actor.send({ type: 'xstate.done.actor.external', output: side({ turns: [{ agent_response: 'paid' } as any] }) } as any);
  t.equal(snap().value, 'delivering');
  t.same(snap().context.unread, ['paid']);
  t.same(snap().context.state, { paid: true });
  actor.send({ type: 'xstate.done.actor.deliver', output: false } as any);
  t.equal(snap().value, 'idle', 'not delivered: back to idle, the words kept');
  t.same(snap().context.unread, ['paid']);
  actor.send({ type: 'EXTERNAL_EVENT', event: external('e1') });
  t.equal(snap().value, 'idle', 'a second delivery resumes nothing');
  actor.send({ type: 'MESSAGE', message: 'hi', metadata: {}, integrationAttributes: {}, at: 5000 });
  actor.send({ type: 'xstate.done.actor.turn', output: outcome({ response: 'Hello' }) } as any);
  t.equal(snap().context.outcome?.ok && snap().context.outcome!.ok && (snap().context.outcome as any).response, 'paid Hello', 'the next response starts with them');
  t.same(snap().context.unread, []);
  // The timeout.
  actor.send({ type: 'MESSAGE', message: 'pay', metadata: {}, integrationAttributes: {}, at: 6000 });
  actor.send({ type: 'xstate.done.actor.turn', output: outcome({ awaiting: { eventId: 'e2', deadline: 9000 } }) } as any);
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
  t.match(snap().context.bridgeEnded, { bridge_duration_seconds: 3, call_duration_seconds: 4, at: String });
  actor.send({ type: 'BRIDGE_ENDED', bridge: { bridge_duration_seconds: 9, call_duration_seconds: 9 }, at: 8000 });
  t.equal(snap().value, 'idle', 'a second notification runs nothing');
  t.equal(snap().context.bridgeEnded!.bridge_duration_seconds, 3);
  // A bridge notification while waiting leaves the wait as it was.
  const b = createActor(machine, { input: { id: 'c4' } });
  b.start();
  b.send({ type: 'START', start });
  b.send({ type: 'xstate.done.actor.start', output: outcome({ awaiting: wait }) } as any);
  t.equal(b.getSnapshot().value, 'waiting');
  b.send({ type: 'BRIDGE_ENDED', bridge: { bridge_duration_seconds: 1, call_duration_seconds: 2 }, at: 3000 });
  b.send({ type: 'xstate.done.actor.bridge', output: side({ said: [] }) } as any);
  t.equal(b.getSnapshot().value, 'waiting', 'back to waiting');
  t.same(b.getSnapshot().context.awaiting, wait, 'the same wait and deadline');
  b.send({ type: 'xstate.done.actor.bridge', output: side({ end: true }) } as any);
  b.send({ type: 'CLOSE', at: 4000 });
  t.equal(b.getSnapshot().value, 'ending', 'a close while waiting ends it');
  t.equal(b.getSnapshot().context.awaiting, null);
  b.stop();
  actor.stop();
});
