import t, { type Test } from 'tap';
import { createActor, fromPromise } from 'xstate';
import { getShortestPaths, getSimplePaths } from 'xstate/graph';
import { alertRuleMachine, breaches, judged, type AlertRuleEmitted, type Reading, type RuleDefinition } from '../machines/alert-rule.js';

const never = <T>() => new Promise<T>(() => undefined);
// Effects never settle on their own here: the paths drive them with their done and error events.
const machine = alertRuleMachine.provide({
  actors: { evaluate: fromPromise(() => never<Reading>()), notify: fromPromise(() => never<void>()), sleepUntil: fromPromise(() => never<number>()) },
});
const input = { id: 'ar_1', intervalMs: 1000 };
const rule: RuleDefinition = { name: 'errors', project_id: 'p1', metric: 'function_errors', operator: '>=', threshold_value: 2, window_duration: '5m', enabled: true };
const reading = (value: number | null) => ({ type: 'xstate.done.actor.evaluate', output: { value } });
const events = [
  { type: 'CREATE', account_id: 'acc', rule, at: 1000 },
  { type: 'UPDATE', changes: { enabled: false }, at: 2000 },
  { type: 'UPDATE', changes: { enabled: true }, at: 3000 },
  { type: 'DELETE', at: 4000 },
  reading(5),
  reading(0),
  reading(null),
  { type: 'xstate.error.actor.evaluate', error: new Error('store down') },
  { type: 'xstate.done.actor.notify' },
  { type: 'xstate.error.actor.notify', error: new Error('nats down') },
  { type: 'xstate.done.actor.tick', output: 61_000 },
] as any[];
const fewer = [events[0], events[1], events[3], reading(5), reading(0), { type: 'xstate.done.actor.notify' }, { type: 'xstate.done.actor.tick', output: 61_000 }] as any[];
// Paths over the state value, the rule's state, whether it is enabled and whether a notice is pending.
const serializeState = (s: any) => JSON.stringify([s.value, s.context.state, s.context.rule?.enabled ?? null, s.context.notice !== null]);
const label = (e: any) => (e.type === 'xstate.done.actor.evaluate' ? `read:${e.output.value}` : e.type === 'UPDATE' ? `UPDATE(enabled=${e.changes.enabled})` : e.type.replace('xstate.done.actor.', 'done:').replace('xstate.error.actor.', 'error:'));

const replay = (t: Test, paths: Array<{ steps: Array<{ event: any }>; state: { value: unknown } }>) => {
  for (const path of paths) {
    const actor = createActor(machine, { input });
    actor.start();
    for (const step of path.steps) actor.send(step.event);
    t.same(actor.getSnapshot().value, path.state.value, path.steps.map((s) => label(s.event)).join(' → ') || '(start)');
    actor.stop();
  }
};

t.test('alert rule: every state is reachable and every shortest and simple path replays on a real actor', async (t) => {
  const shortest = getShortestPaths(machine, { events, serializeState, input } as any);
  t.same([...new Set(shortest.map((p) => p.state.value))].sort(), ['deleted', 'disabled', 'evaluating', 'new', 'notifying', 'waiting']);
  replay(t, shortest as any);
  // Simple paths over a smaller alphabet (the full one has too many to walk): fire, resolve, disable, delete.
  const simple = getSimplePaths(machine, { events: fewer, serializeState, input } as any);
  t.ok(simple.length > 10, `${simple.length} simple paths`);
  replay(t, simple as any);
});

t.test('alert rule: every transition of the machine is taken by some path', async (t) => {
  // From every reachable state (its shortest path), every event once.
  const taken = new Set<string>();
  const at = (a: any) => `${JSON.stringify(a.getSnapshot().value)}/${a.getSnapshot().context.state}`;
  for (const p of getShortestPaths(machine, { events, serializeState, input } as any)) {
    for (const event of events) {
      const actor = createActor(machine, { input });
      actor.start();
      for (const step of p.steps) actor.send(step.event as any);
      // An effect's error event only where that effect runs (elsewhere an actor treats it as its own error).
      const effect = /^xstate\.error\.actor\.(.+)$/.exec(event.type)?.[1];
      if (effect && !actor.getSnapshot().children[effect]) {
        actor.stop();
        continue;
      }
      const before = at(actor);
      actor.send(event);
      taken.add(`${before} -${label(event)}-> ${at(actor)}`);
      actor.stop();
    }
  }
  const expected = [
    '"new"/ok -CREATE-> "waiting"/ok',
    '"waiting"/ok -done:tick-> "evaluating"/ok',
    '"evaluating"/ok -read:5-> "notifying"/alert',
    '"evaluating"/ok -read:0-> "waiting"/ok',
    '"evaluating"/ok -read:null-> "waiting"/no_data',
    '"evaluating"/ok -error:evaluate-> "waiting"/unknown',
    '"notifying"/alert -done:notify-> "waiting"/alert',
    '"notifying"/alert -error:notify-> "waiting"/alert',
    '"waiting"/alert -done:tick-> "evaluating"/alert',
    '"evaluating"/alert -read:0-> "notifying"/ok',
    '"evaluating"/alert -read:5-> "waiting"/alert',
    // The traffic that breached it stopped: the alert is over (alerts.resolved).
    '"evaluating"/alert -read:null-> "notifying"/no_data',
    '"evaluating"/alert -error:evaluate-> "waiting"/unknown',
    '"evaluating"/no_data -read:5-> "notifying"/alert',
    '"evaluating"/unknown -read:5-> "notifying"/alert',
    '"waiting"/ok -UPDATE(enabled=false)-> "disabled"/ok',
    '"disabled"/ok -UPDATE(enabled=true)-> "evaluating"/ok',
    '"waiting"/ok -DELETE-> "deleted"/ok',
    '"disabled"/ok -DELETE-> "deleted"/ok',
    '"evaluating"/ok -DELETE-> "deleted"/ok',
  ];
  for (const e of expected) t.ok(taken.has(e), e);
});

t.test('alert rule: the readings, the notices and the domain events of a rule that fires and resolves', async (t) => {
  const actor = createActor(machine, { input });
  const emitted: AlertRuleEmitted[] = [];
  actor.on('*', (e: any) => emitted.push(e));
  actor.start();
  actor.send({ type: 'CREATE', account_id: 'acc', rule, at: 1000 });
  let c = actor.getSnapshot().context;
  t.equal(c.state, 'ok', 'ok until the first evaluation');
  t.equal(c.since, null);
  t.equal(c.lastEvaluatedAt, null);
  t.equal(actor.getSnapshot().value, 'waiting', 'not evaluated in the creating step');
  t.same(actor.getSnapshot().children.tick?.getSnapshot().input, { until: 1000 }, 'the first evaluation due at once');
  actor.send({ type: 'xstate.done.actor.tick', output: 1000 } as any);
  t.equal(actor.getSnapshot().value, 'evaluating');
  actor.send(reading(null) as any);
  c = actor.getSnapshot().context;
  t.match(c, { state: 'no_data', since: 1000, lastEvaluatedAt: 1000, currentValue: null, nextAt: 2000 });
  t.same(actor.getSnapshot().children.tick?.getSnapshot().input, { until: 2000 }, 'the next evaluation on an absolute deadline');
  actor.send({ type: 'xstate.done.actor.tick', output: 2005 } as any);
  actor.send(reading(3) as any);
  c = actor.getSnapshot().context;
  t.equal(actor.getSnapshot().value, 'notifying');
  t.match(c, { state: 'alert', since: 2005, lastEvaluatedAt: 2005, currentValue: 3, nextAt: 3005 });
  t.same(c.notice, { type: 'alerts.triggered', n: 1, previousState: 'no_data', currentValue: 3, at: 2005 });
  t.same(emitted.map((e) => e.type), ['alert.triggered']);
  t.match(emitted[0].data, { account_id: 'acc', project_id: 'p1', rule_id: 'ar_1', current_value: 3, previous_state: 'no_data', threshold_value: 2 });
  // Sending failed: the notice is kept and sent again after the next evaluation, with the same number.
  actor.send({ type: 'xstate.error.actor.notify', error: new Error('x') } as any);
  t.equal(actor.getSnapshot().value, 'waiting');
  actor.send({ type: 'xstate.done.actor.tick', output: 3005 } as any);
  actor.send(reading(4) as any);
  t.equal(actor.getSnapshot().value, 'notifying', 'the kept notice is sent');
  t.equal(actor.getSnapshot().context.notice!.n, 1);
  t.equal(actor.getSnapshot().context.since, 2005, 'still alert: since kept');
  actor.send({ type: 'xstate.done.actor.notify' } as any);
  t.equal(actor.getSnapshot().context.notice, null);
  actor.send({ type: 'UPDATE', changes: { threshold_value: 10 }, at: 3500 } as any);
  t.equal(actor.getSnapshot().value, 'evaluating', 'UPDATE evaluates at once');
  actor.send(reading(4) as any);
  c = actor.getSnapshot().context;
  t.match(c, { state: 'ok', since: 3500, updatedAt: 3500 });
  t.same(c.notice, { type: 'alerts.resolved', n: 2, previousState: 'alert', currentValue: 4, at: 3500 });
  t.same(emitted.map((e) => e.type), ['alert.triggered', 'alert.resolved']);
  actor.send({ type: 'DELETE', at: 4000 } as any);
  t.ok(actor.getSnapshot().hasTag('done'));
  actor.send({ type: 'UPDATE', changes: { enabled: true }, at: 5000 } as any);
  t.equal(actor.getSnapshot().value, 'deleted', 'nothing after delete');
  actor.stop();
});

t.test('alert rule: a firing alert whose window empties resolves; one whose evaluation fails does not', async (t) => {
  for (const [what, last, state, resolved] of [
    ['no data left', reading(null), 'no_data', true],
    ['the metric store unreadable', { type: 'xstate.error.actor.evaluate', error: new Error('down') }, 'unknown', false],
  ] as const) {
    const actor = createActor(machine, { input });
    const emitted: AlertRuleEmitted[] = [];
    actor.on('*', (e: any) => emitted.push(e));
    actor.start();
    actor.send({ type: 'CREATE', account_id: 'acc', rule, at: 1000 });
    actor.send({ type: 'xstate.done.actor.tick', output: 1000 } as any);
    actor.send(reading(5) as any);
    actor.send({ type: 'xstate.done.actor.notify' } as any);
    actor.send({ type: 'xstate.done.actor.tick', output: 2000 } as any);
    actor.send(last as any);
    const c = actor.getSnapshot().context;
    t.equal(c.state, state, what);
    t.same(emitted.map((e) => e.type), resolved ? ['alert.triggered', 'alert.resolved'] : ['alert.triggered'], `${what}: ${resolved ? 'resolved' : 'not resolved'}`);
    if (resolved) t.same(c.notice, { type: 'alerts.resolved', n: 2, previousState: 'alert', currentValue: null, at: 2000 });
    actor.stop();
  }
});

t.test('breaches and judged', async (t) => {
  t.ok(breaches(10, '>=', 10));
  t.notOk(breaches(10, '>', 10));
  t.ok(breaches(9, '<', 10));
  t.ok(breaches(10, '<=', 10));
  t.equal(judged(rule, { value: null }), 'no_data');
  t.equal(judged(rule, { value: 2 }), 'alert');
  t.equal(judged(rule, { value: 1 }), 'ok');
});
