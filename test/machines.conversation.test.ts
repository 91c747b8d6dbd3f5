import t from 'tap';
import { createActor, fromPromise } from 'xstate';
import { getShortestPaths, getSimplePaths } from 'xstate/graph';
import { conversationMachine, type ConversationStart, type TurnOutcome } from '../machines/conversation.js';

const start: ConversationStart = {
  accountId: 'acc', projectId: 'p', environment: 'live', channel: 'CHAT', variantId: null, integrationAttributes: {},
  asrLangCode: '', ttsLangCode: '', initialMessage: null, fromNumber: '', toNumber: '', at: 1000, idleTimeoutMs: 60_000,
};
const outcome = (o: Partial<TurnOutcome> = {}): TurnOutcome => ({
  at: 2000, turns: [], response: 'ok', state: {}, handoff: null, end: false, oodTurns: 0, functionErrors: 0, variant: null, artifactVersion: 'a1', ...o,
});
const never = <T>() => new Promise<T>(() => undefined);
// Effects never settle on their own here: the paths drive them with their done events.
const machine = conversationMachine.provide({
  actors: {
    startConversation: fromPromise(() => never<TurnOutcome>()),
    takeTurn: fromPromise(() => never<TurnOutcome>()),
    endConversation: fromPromise(() => never<{ at: number; state: Record<string, unknown>; functionErrors: number }>()),
    sleepUntil: fromPromise(() => never<number>()),
  },
});
const events = [
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
const serializeState = (s: any) => JSON.stringify([s.value, s.context.outcome?.ok ?? null, s.context.endReason]);

t.test('conversation: every state is reachable and every simple path replays on a real actor', async (t) => {
  const shortest = getShortestPaths(machine, { events, serializeState, input: { id: 'c1' } } as any);
  const values = new Set(shortest.map((p) => p.state.value));
  t.same([...values].sort(), ['ended', 'ending', 'handedOff', 'idle', 'new', 'responding', 'starting']);
  const paths = getSimplePaths(machine, { events, serializeState, input: { id: 'c1' } } as any);
  t.ok(paths.length > 20, `${paths.length} simple paths`);
  for (const path of paths) {
    const actor = createActor(machine, { input: { id: 'c1' } });
    actor.start();
    for (const step of path.steps) actor.send(step.event as any);
    t.same(actor.getSnapshot().value, path.state.value, path.steps.map((s: any) => s.event.type.replace('xstate.done.actor.', 'done:')).join(' → ') || '(start)');
    actor.stop();
  }
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
