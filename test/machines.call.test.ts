/**
 * The call machine (machines/call.ts), path by path with xstate/graph: every state and every transition is
 * reached, each path replays on a real actor, the emitted domain events are the contract's, and terminal
 * statuses never change.
 */
import t from 'tap';
import { createActor, fromPromise } from 'xstate';
import { getShortestPaths, getSimplePaths } from 'xstate/graph';
import { callMachine, callStatus, type CallRequest, type DialOutput, type SlotWaitInput } from '../machines/call.js';

const settings = { queueTimeoutMs: 1000, ringTimeoutMs: 2000, retentionMs: 7_200_000, dialGraceMs: 500, wakeMs: 250 };
const request: CallRequest = {
  account_id: 'acc', project_id: 'p', environment: 'live', variant_id: null, connector_id: 'con', telephony_connector_id: 'tc',
  to: '+14155550123', from: '+14155550100', headers: { 'X-Ref': 'r1' }, encryption: 'TLS/SRTP',
};
const never = <T>() => new Promise<T>(() => undefined);
// Effects never settle on their own: the paths drive them with their done/error events.
const machine = callMachine.provide({
  actors: {
    acquireSlot: fromPromise(() => never<number>()),
    releaseSlot: fromPromise(() => never<void>()),
    dial: fromPromise(() => never<DialOutput>()),
    sleepUntil: fromPromise(() => never<number>()),
  },
});
const input = { id: 'OUT-1', settings };
const done = (id: string, output: unknown) => ({ type: `xstate.done.actor.${id}`, output }) as any;
const error = (id: string) => ({ type: `xstate.error.actor.${id}`, error: new Error('x') }) as any;
const dialed = (outcome: DialOutput['outcome'], sipStatus: number | null = null) =>
  done('dial', { outcome, sipStatus, conversationId: outcome === 'answered' ? 'conv1' : null, at: 3000 } satisfies DialOutput);

const allEvents = [
  { type: 'PLACE', request, at: 1000 },
  { type: 'STATUS' },
  { type: 'CALL_ENDED', at: 9000 },
  { type: 'CALL_ENDED', at: 9000, conversation_id: 'conv1', sip_status: 200 },
  done('slot', 1500),
  error('slot'),
  done('queueTimer', 2000),
  dialed('answered', 200),
  dialed('busy', 486),
  dialed('rejected', 603),
  dialed('no_answer', 408),
  dialed('unreachable'),
  dialed('error'),
  error('dial'),
  done('dialTimer', 4000),
  done('retention', 9_999_999),
  done('wake', 1250),
  error('release'),
] as any[];
// An effect's error event exists only while its effect runs (XState fails an actor on an unhandled one).
const ERRORS: Record<string, (s: any) => boolean> = {
  'xstate.error.actor.slot': (s) => s.matches('queued'),
  'xstate.error.actor.dial': (s) => s.matches('calling'),
  'xstate.error.actor.release': (s) => s.matches('failure') || s.matches({ success: 'ended' }),
};
const eventsIn = (s: any) => allEvents.filter((e) => !ERRORS[e.type] || ERRORS[e.type](s));
const events = eventsIn as any;
const serializeState = (s: any) => JSON.stringify([s.value, s.context.failure]);
const stateName = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

const run = (steps: Array<{ event: any }>) => {
  const emitted: string[] = [];
  const actor = createActor(machine, { input });
  actor.on('*', (e: any) => emitted.push(e.type));
  actor.start();
  for (const step of steps) actor.send(step.event);
  return { actor, emitted };
};

t.test('call: every state is reachable and each shortest path replays on a real actor', async (t) => {
  const paths = getShortestPaths(machine, { events, serializeState, input } as any);
  t.same(
    [...new Set(paths.map((p) => stateName(p.state.value)))].sort(),
    ['{"calling":"waiting"}', 'expired', 'failure', 'new', '{"queued":"waiting"}', '{"success":"connected"}', '{"success":"ended"}'].sort(),
  );
  const failures = new Set(paths.filter((p) => p.state.value === 'failure').map((p) => (p.state.context as any).failure));
  t.same([...failures].sort(), ['busy', 'error', 'no_answer', 'queue_timeout', 'rejected', 'trunk_missing', 'unreachable'], 'every failure reason is reached');
  for (const path of paths) {
    const { actor } = run(path.steps);
    t.same(actor.getSnapshot().value, path.state.value, `replays: ${path.steps.map((s) => s.event.type).join(' → ') || '(start)'}`);
    actor.stop();
  }
});

t.test('call: every simple path emits the contract events in order, and terminal statuses never change', async (t) => {
  const paths = getSimplePaths(machine, { events, serializeState, input } as any);
  t.ok(paths.length > 10);
  for (const path of paths) {
    const { actor, emitted } = run(path.steps);
    const label = path.steps.map((s) => s.event.type.replace('xstate.', '')).join(' → ') || '(start)';
    // call.queued first, call.calling only after it, and at most one terminal event, last.
    const expected = ['call.queued', 'call.calling', 'call.succeeded', 'call.failed'];
    t.ok(emitted.every((e) => expected.includes(e)), `${label}: only call events`);
    t.ok(emitted.length === 0 || emitted[0] === 'call.queued', `${label}: queued first`);
    t.ok(emitted.filter((e) => e === 'call.succeeded' || e === 'call.failed').length <= 1, `${label}: one terminal event at most`);
    const status = callStatus(actor.getSnapshot());
    if (status === 'success' || status === 'failure') {
      // Whatever comes next, a terminal status stays (until retention expires it).
      for (const e of eventsIn(actor.getSnapshot())) {
        if (e.type === 'xstate.done.actor.retention') continue;
        actor.send(e);
        const after = callStatus(actor.getSnapshot());
        t.equal(after, status, `${label} + ${e.type}: still ${status}`);
      }
    }
    actor.stop();
  }
});

t.test('call: the events carry account, project and call sid; a failure its reason', async (t) => {
  const seen: any[] = [];
  const actor = createActor(machine, { input });
  actor.on('*', (e: any) => seen.push(e));
  actor.start();
  actor.send({ type: 'PLACE', request, at: 1000 });
  actor.send(done('slot', 1500));
  actor.send(dialed('busy', 486));
  t.same(seen.map((e) => e.type), ['call.queued', 'call.calling', 'call.failed']);
  for (const e of seen) t.match(e.data, { account_id: 'acc', project_id: 'p', call_sid: 'OUT-1' });
  t.match(seen[2].data, { reason: 'busy', sip_status: 486 });
  const s = actor.getSnapshot();
  t.equal(s.context.endedAt, 3000, 'the end time comes from the dial result');
  t.equal(callStatus(s), 'failure');
  actor.stop();
});

t.test("call: a hang-up while still calling (the dial's answer lost) is a success with the conversation and SIP status it carries", async (t) => {
  const hungUp = (ended: { at: number; conversation_id?: string; sip_status?: number }) => {
    const seen: any[] = [];
    const actor = createActor(machine, { input });
    actor.on('*', (e: any) => seen.push(e));
    actor.start();
    actor.send({ type: 'PLACE', request, at: 1000 });
    actor.send(done('slot', 1500));
    actor.send({ type: 'CALL_ENDED', ...ended });
    const s = actor.getSnapshot();
    actor.stop();
    return { s, seen };
  };
  const { s, seen } = hungUp({ at: 9000, conversation_id: 'conv1', sip_status: 200 });
  t.same(s.value, { success: 'ended' });
  t.equal(callStatus(s), 'success');
  t.match(s.context, { conversationId: 'conv1', sipStatus: 200, answeredAt: 1500, endedAt: 9000, failure: null });
  t.match(seen.find((e) => e.type === 'call.succeeded')?.data, { conversation_id: 'conv1', call_sid: 'OUT-1' }, 'call.succeeded names the conversation');
  // A media gateway of an older version sends neither: still a success, as before.
  t.match(hungUp({ at: 9000 }).s.context, { conversationId: null, sipStatus: null, endedAt: 9000 });
  // Once connected, the dial's own answer stays.
  const actor = createActor(machine, { input });
  actor.start();
  actor.send({ type: 'PLACE', request, at: 1000 });
  actor.send(done('slot', 1500));
  actor.send(dialed('answered', 200));
  actor.send({ type: 'CALL_ENDED', at: 9000, conversation_id: 'other', sip_status: 200 });
  t.match(actor.getSnapshot().context, { conversationId: 'conv1', sipStatus: 200, endedAt: 9000 });
  actor.stop();
});

t.test('call: durable timers have absolute deadlines from the events’ times', async (t) => {
  const deadlines: Array<{ until: number }> = [];
  const m = callMachine.provide({
    actors: {
      acquireSlot: fromPromise(() => never<number>()),
      releaseSlot: fromPromise<void, any>(async () => undefined),
      dial: fromPromise(() => never<DialOutput>()),
      sleepUntil: fromPromise(async ({ input }: { input: { until: number } }) => {
        deadlines.push(input);
        return never<number>();
      }),
    },
  });
  const actor = createActor(m, { input });
  actor.start();
  actor.send({ type: 'PLACE', request, at: 1000 });
  await new Promise((r) => setImmediate(r));
  t.same(deadlines.map((d) => d.until).sort(), [1000 + settings.queueTimeoutMs, 1000 + settings.wakeMs].sort(), 'queue timeout and first wake-up from the placing time');
  deadlines.length = 0;
  actor.send(done('slot', 1500));
  await new Promise((r) => setImmediate(r));
  t.same(deadlines.map((d) => d.until).sort(), [1500 + settings.ringTimeoutMs + settings.dialGraceMs, 1500 + settings.wakeMs].sort(), 'dial guard and wake-up from the calling time');
  deadlines.length = 0;
  actor.send(dialed('answered', 200));
  actor.send({ type: 'CALL_ENDED', at: 9000 });
  await new Promise((r) => setImmediate(r));
  t.same(deadlines, [{ until: 9000 + settings.retentionMs }], 'retention from the end time; no wake-ups once terminal');
  actor.stop();
});

t.test('call: the slot wait runs with the placing time, which orders the calls waiting for the trunk', async (t) => {
  const waits: SlotWaitInput[] = [];
  const m = callMachine.provide({
    actors: {
      acquireSlot: fromPromise(({ input }: { input: SlotWaitInput }) => (waits.push(input), never<number>())),
      releaseSlot: fromPromise<void, any>(async () => undefined),
      dial: fromPromise(() => never<DialOutput>()),
      sleepUntil: fromPromise(() => never<number>()),
    },
  });
  const actor = createActor(m, { input });
  actor.start();
  actor.send({ type: 'PLACE', request, at: 1000 });
  await new Promise((r) => setImmediate(r));
  t.same(waits, [{ callSid: input.id, telephonyConnectorId: request.telephony_connector_id, queuedAt: 1000 }]);
  actor.stop();
});

t.test('call: the paths cover every transition of the machine', async (t) => {
  const paths = getSimplePaths(machine, { events, serializeState, input } as any);
  const edges = new Set<string>();
  for (const path of paths) {
    const actor = createActor(machine, { input });
    actor.start();
    for (const step of path.steps) {
      const before = stateName(actor.getSnapshot().value);
      actor.send(step.event);
      const after = stateName(actor.getSnapshot().value);
      if (before !== after) edges.add(`${before} --${step.event.type.replace('xstate.', '')}--> ${after}`);
    }
    actor.stop();
  }
  t.same([...edges].sort(), [
    'new --PLACE--> {"queued":"waiting"}',
    '{"queued":"waiting"} --done.actor.slot--> {"calling":"waiting"}',
    '{"queued":"waiting"} --error.actor.slot--> failure',
    '{"queued":"waiting"} --done.actor.queueTimer--> failure',
    '{"calling":"waiting"} --done.actor.dial--> {"success":"connected"}',
    '{"calling":"waiting"} --done.actor.dial--> failure',
    '{"calling":"waiting"} --error.actor.dial--> failure',
    '{"calling":"waiting"} --done.actor.dialTimer--> failure',
    '{"calling":"waiting"} --CALL_ENDED--> {"success":"ended"}',
    '{"success":"connected"} --CALL_ENDED--> {"success":"ended"}',
    '{"success":"ended"} --done.actor.retention--> expired',
    'failure --done.actor.retention--> expired',
  ].sort());
});

t.test('call: a wake-up re-arms itself and leaves the running effects alone', async (t) => {
  const starts: string[] = [];
  const wakes: number[] = [];
  const m = callMachine.provide({
    actors: {
      acquireSlot: fromPromise(() => (starts.push('slot'), never<number>())),
      releaseSlot: fromPromise<void, any>(async () => undefined),
      dial: fromPromise(() => (starts.push('dial'), never<DialOutput>())),
      sleepUntil: fromPromise(({ input }: { input: { until: number } }) => (wakes.push(input.until), never<number>())),
    },
  });
  const actor = createActor(m, { input });
  actor.start();
  actor.send({ type: 'PLACE', request, at: 1000 });
  actor.send(done('wake', 1250));
  actor.send(done('wake', 1600));
  await new Promise((r) => setImmediate(r));
  t.same(starts, ['slot'], 'the slot wait runs on, not restarted');
  t.equal(actor.getSnapshot().context.wakeAt, 1600 + settings.wakeMs, 'the next wake-up from when it fired');
  actor.send(done('slot', 2000));
  actor.send(done('wake', 2250));
  await new Promise((r) => setImmediate(r));
  t.same(starts, ['slot', 'dial'], 'the dial runs on, not restarted');
  t.ok(wakes.includes(2250 + settings.wakeMs));
  actor.stop();
});
