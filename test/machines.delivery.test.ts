import t, { type Test } from 'tap';
import { createActor, fromPromise } from 'xstate';
import { getShortestPaths, getSimplePaths } from 'xstate/graph';
import { deliveryMachine, MAX_KEPT_ATTEMPTS, retryable, succeeded, type AttemptResult, type DeliveryEmitted } from '../machines/delivery.js';
import { earliestDeadline } from '../actors/timers.js';

const never = <T>() => new Promise<T>(() => undefined);
// Effects never settle on their own here: the paths drive them with their done events.
const machine = deliveryMachine.provide({
  actors: { attempt: fromPromise(() => never<AttemptResult>()), sleepUntil: fromPromise(() => never<number>()) },
});
const input = { id: 'whd_1', schedule: [0, 100, 500], maxRetryAfterMs: 10_000, attemptWatchdogMs: 60_000 };
/** A state value's top-level name (`attempting` holds its watchdog's child state). */
const top = (v: unknown): string => (typeof v === 'string' ? v : Object.keys(v as object)[0]);
// Two attempts per series keep the simple paths few while every transition stays reachable.
const pathInput = { ...input, schedule: [0, 100] };
// A schedule whose first attempt waits too: the other way out of `scheduling`.
const delayedInput = { ...input, schedule: [200, 100] };
const deliver = { type: 'DELIVER', endpoint_id: 'whe_1', account_id: 'acc', project_id: 'p', event_id: 'evt_1', event_type: 'alerts.triggered', body: '{"a":1}', at: 1000 };
const result = (o: Partial<AttemptResult> = {}): AttemptResult => ({ startedAt: 1000, endedAt: 1010, status: 200, error: null, detail: null, retryAfterMs: null, ...o });
const done = (o: Partial<AttemptResult>) => ({ type: 'xstate.done.actor.attempt', output: result(o) });
const events = [
  deliver,
  { type: 'REDELIVER', at: 5000 },
  { type: 'xstate.done.actor.backoff', output: 1000 },
  done({ status: 204 }),
  done({ status: 500 }),
  done({ status: 400 }),
  done({ status: null, error: 'timeout' }),
  done({ status: null, error: 'private_address' }),
  { type: 'xstate.error.actor.attempt', error: new Error('bug') },
  { type: 'xstate.done.actor.watchdog', output: 70_000 },
] as any[];
// Paths are over the state value, whether this is a redelivery and how far into it the delivery is.
const serializeState = (s: any) => JSON.stringify([s.value, Math.min(s.context.series, 2), s.context.attempt]);

const replay = (t: Test, paths: Array<{ steps: Array<{ event: any }>; state: { value: unknown } }>) => {
  for (const path of paths) {
    const actor = createActor(machine, { input: pathInput });
    actor.start();
    for (const step of path.steps) actor.send(step.event);
    t.same(actor.getSnapshot().value, path.state.value, path.steps.map((s) => s.event.type.replace('xstate.done.actor.', 'done:').replace('xstate.error.actor.', 'error:')).join(' → ') || '(start)');
    actor.stop();
  }
};

t.test('delivery: every state is reachable and every shortest and simple path replays on a real actor', async (t) => {
  const shortest = getShortestPaths(machine, { events, serializeState, input: pathInput } as any);
  t.same([...new Set(shortest.map((p) => top(p.state.value)))].sort(), ['attempting', 'delivered', 'failed', 'new', 'waiting']);
  replay(t, shortest as any);
  const delayed = getShortestPaths(machine, { events, serializeState, input: delayedInput } as any);
  for (const path of delayed) {
    const actor = createActor(machine, { input: delayedInput });
    actor.start();
    for (const step of path.steps) actor.send(step.event as any);
    t.same(actor.getSnapshot().value, path.state.value, `first delay 200: ${path.steps.map((s: any) => s.event.type).join(' → ') || '(start)'}`);
    actor.stop();
  }
  const simple = getSimplePaths(machine, { events, serializeState, input: pathInput } as any);
  t.ok(simple.length > shortest.length, `${simple.length} simple paths`);
  replay(t, simple as any);
});

t.test('delivery: every transition of the machine is taken by some path', async (t) => {
  const taken = new Set<string>();
  const paths = [pathInput, delayedInput].flatMap((i) => getSimplePaths(machine, { events, serializeState, input: i } as any).map((p) => ({ ...p, i })));
  for (const p of paths) {
    let actor = createActor(machine, { input: p.i });
    actor.start();
    for (const step of p.steps) {
      const before = JSON.stringify(top(actor.getSnapshot().value));
      actor.send(step.event);
      const after = JSON.stringify(top(actor.getSnapshot().value));
      const ev = step.event as any;
      const label = ev.type === 'xstate.done.actor.attempt' ? `done:${ev.output.status ?? ev.output.error}` : ev.type;
      if (before !== after || ev.type === 'REDELIVER' || ev.type === 'xstate.done.actor.watchdog') taken.add(`${before} -${label}-> ${after}`);
    }
    actor.stop();
    actor = null as never;
  }
  const expected = [
    '"new" -DELIVER-> "attempting"',
    '"new" -DELIVER-> "waiting"',
    '"waiting" -xstate.done.actor.backoff-> "attempting"',
    '"attempting" -done:204-> "delivered"',
    '"attempting" -done:500-> "waiting"',
    '"attempting" -done:timeout-> "waiting"',
    '"attempting" -done:400-> "failed"',
    '"attempting" -done:private_address-> "failed"',
    '"attempting" -xstate.error.actor.attempt-> "waiting"',
    '"waiting" -REDELIVER-> "attempting"',
    '"attempting" -REDELIVER-> "attempting"',
    '"delivered" -REDELIVER-> "attempting"',
    '"failed" -REDELIVER-> "attempting"',
    '"waiting" -REDELIVER-> "waiting"',
    '"delivered" -REDELIVER-> "waiting"',
    '"failed" -REDELIVER-> "waiting"',
  ];
  for (const e of expected) t.ok(taken.has(e), e);
  // The watchdog's self-transition (attempting.watched, re-entered) leads to no new path state: its own test below takes it.
  // The last attempt of a series fails for good, whatever the answer.
  t.ok([...taken].some((e) => e.startsWith('"attempting" -done:500-> "failed"')), 'a retryable failure on the last attempt ends the series');
  t.ok([...taken].some((e) => e.startsWith('"attempting" -xstate.error.actor.attempt-> "failed"')), 'an effect failure on the last attempt ends the series');
});

t.test('delivery: REDELIVER before DELIVER does nothing', async (t) => {
  const actor = createActor(machine, { input });
  actor.start();
  actor.send({ type: 'REDELIVER', at: 5 });
  t.equal(actor.getSnapshot().value, 'new');
  actor.stop();
});

t.test('delivery: what is retried and what is not', async (t) => {
  for (const s of [200, 201, 204, 299]) t.ok(succeeded(result({ status: s })), `${s} succeeds`);
  for (const s of [408, 429, 500, 502, 503, 599]) t.ok(retryable(result({ status: s })), `${s} is retried`);
  for (const s of [300, 301, 400, 401, 403, 404, 409, 410, 422]) t.notOk(retryable(result({ status: s })), `${s} is not retried`);
  t.ok(retryable(result({ status: null, error: 'timeout' })));
  t.ok(retryable(result({ status: null, error: 'network' })));
  for (const e of ['private_address', 'endpoint_deleted', 'endpoint_disabled'] as const) t.notOk(retryable(result({ status: null, error: e })), `${e} is not retried`);
});

t.test('delivery: the schedule, Retry-After (capped), the emitted events and the durable deadline', async (t) => {
  const emitted: DeliveryEmitted[] = [];
  const actor = createActor(machine, { input });
  actor.on('*', (e) => emitted.push(e as DeliveryEmitted));
  actor.start();
  actor.send(deliver as any);
  t.ok(actor.getSnapshot().matches('attempting'), 'the first attempt starts at once (first delay 0), no backoff timer');
  t.equal(earliestDeadline(actor.getPersistedSnapshot()), 61_000, 'only the attempt watchdog, from when the attempt was due');
  actor.send(done({ status: 503, endedAt: 1040 }) as any);
  t.equal(actor.getSnapshot().context.nextAt, 1100, "second attempt: at the schedule's offset from the series' start (delivered at 1000), not counted from the failure's end");
  t.equal(earliestDeadline(actor.getPersistedSnapshot()), 1100, 'the deadline is in the persisted snapshot');
  actor.send({ type: 'xstate.done.actor.backoff', output: 1100 } as any);
  actor.send(done({ status: 503, startedAt: 1100, endedAt: 1700 }) as any);
  t.equal(actor.getSnapshot().context.nextAt, 1700, 'an attempt that ended past the next offset is followed at once, never before it ended');
  actor.send({ type: 'xstate.done.actor.backoff', output: 1700 } as any);
  actor.send(done({ status: 500, endedAt: 1800 }) as any);
  t.equal(actor.getSnapshot().value, 'failed', 'three attempts in all, then failed');
  t.same(actor.getSnapshot().context.attempts.map((a) => [a.series, a.n, a.status, a.nextAt]), [[1, 1, 503, 1100], [1, 2, 503, 1700], [1, 3, 500, null]]);
  t.same(emitted.map((e) => e.type), ['delivery.attempted', 'delivery.attempted', 'delivery.attempted', 'delivery.failed']);
  t.same(emitted[0].data, { account_id: 'acc', project_id: 'p', delivery_id: 'whd_1', endpoint_id: 'whe_1', event_id: 'evt_1', event_type: 'alerts.triggered', series: 1, attempt: 1, status: 503, error: null, duration_ms: 40, next_attempt_at: 1100 });

  actor.send({ type: 'REDELIVER', at: 9000 });
  t.ok(actor.getSnapshot().matches('attempting'), 'a redelivery starts at once');
  t.equal(actor.getSnapshot().context.series, 2);
  actor.send(done({ status: 429, endedAt: 9010, retryAfterMs: 1000 }) as any);
  t.equal(actor.getSnapshot().context.nextAt, 10_010, "Retry-After later than the schedule's offset wins, counted from the attempt's end");
  actor.send({ type: 'xstate.done.actor.backoff', output: 10_010 } as any);
  actor.send(done({ status: 503, endedAt: 10_050 }) as any);
  t.equal(actor.getSnapshot().value, 'waiting', "the offsets count from the redelivery: its third attempt is at 9000 + 500");
  t.equal(actor.getSnapshot().context.nextAt, 10_050, 'past the offset already: at once');
  actor.send({ type: 'REDELIVER', at: 20_000 });
  actor.send(done({ status: 429, endedAt: 20_100, retryAfterMs: 10_000_000 }) as any);
  t.equal(actor.getSnapshot().context.nextAt, 30_100, 'Retry-After is capped at maxRetryAfterMs');
  actor.send({ type: 'xstate.done.actor.backoff', output: 30_100 } as any);
  actor.send(done({ status: 200, endedAt: 30_200 }) as any);
  t.equal(actor.getSnapshot().value, 'delivered');
  t.same(emitted.slice(4).map((e) => e.type), ['delivery.redelivered', 'delivery.attempted', 'delivery.attempted', 'delivery.redelivered', 'delivery.attempted', 'delivery.attempted', 'delivery.succeeded']);
  t.equal(actor.getSnapshot().context.delivery!.eventId, 'evt_1', 'same event id in every series');
  t.equal(actor.getSnapshot().context.delivery!.body, '{"a":1}', 'same body in every series');
  actor.stop();
});

t.test('delivery: DELIVER again is ignored; the log keeps the newest attempts', async (t) => {
  const actor = createActor(machine, { input: { ...input, schedule: [0] } });
  actor.start();
  actor.send(deliver as any);
  actor.send({ ...deliver, event_id: 'other', body: '{}' } as any);
  t.equal(actor.getSnapshot().context.delivery!.eventId, 'evt_1');
  for (let i = 0; i < MAX_KEPT_ATTEMPTS + 5; i++) {
    actor.send(done({ status: 500 }) as any);
    t.equal(actor.getSnapshot().value, 'failed');
    actor.send({ type: 'REDELIVER', at: 1 });
  }
  const c = actor.getSnapshot().context;
  t.equal(c.attempts.length, MAX_KEPT_ATTEMPTS);
  t.equal(c.attemptCount, MAX_KEPT_ATTEMPTS + 5);
  t.equal(c.attempts[c.attempts.length - 1].series, MAX_KEPT_ATTEMPTS + 5);
  actor.stop();
});

t.test('delivery: a first delay above 0 waits on the durable timer, for the first series and for a redelivery', async (t) => {
  const actor = createActor(machine, { input: delayedInput });
  actor.start();
  actor.send(deliver as any);
  t.equal(actor.getSnapshot().value, 'waiting');
  t.equal(earliestDeadline(actor.getPersistedSnapshot()), 1200);
  actor.send({ type: 'xstate.done.actor.backoff', output: 1200 } as any);
  actor.send(done({ status: 200 }) as any);
  actor.send({ type: 'REDELIVER', at: 5000 });
  t.equal(actor.getSnapshot().value, 'waiting');
  t.equal(earliestDeadline(actor.getPersistedSnapshot()), 5200);
  actor.stop();
});

t.test('delivery: the attempt watchdog is a durable deadline that re-arms from when it fired, without touching the attempt', async (t) => {
  const started: number[] = [];
  const m = deliveryMachine.provide({
    actors: {
      attempt: fromPromise(() => {
        started.push(1);
        return never<AttemptResult>();
      }),
      sleepUntil: fromPromise(() => never<number>()),
    },
  });
  const actor = createActor(m, { input: delayedInput });
  actor.start();
  actor.send(deliver as any);
  actor.send({ type: 'xstate.done.actor.backoff', output: 1300 } as any);
  t.ok(actor.getSnapshot().matches({ attempting: 'watched' }));
  t.equal(earliestDeadline(actor.getPersistedSnapshot()), 61_300, 'the watchdog counts from when the backoff fired');
  t.equal(started.length, 1);
  actor.send({ type: 'xstate.done.actor.watchdog', output: 70_000 } as any);
  t.equal(earliestDeadline(actor.getPersistedSnapshot()), 130_000, 're-armed from when it fired');
  t.equal(started.length, 1, 'the attempt in flight is not restarted');
  actor.send(done({ status: 200 }) as any);
  t.equal(actor.getSnapshot().value, 'delivered');
  t.equal(earliestDeadline(actor.getPersistedSnapshot()), null, 'nothing pending once delivered');
  actor.stop();
});
