import t from 'tap';
import { createActor, fromPromise, waitFor } from 'xstate';
import { getShortestPaths, getSimplePaths } from 'xstate/graph';
import { counterMachine } from '../machines/counter.js';
import { earliestDeadline, sleepUntil } from '../actors/timers.js';

const events = [{ type: 'INC' }, { type: 'ARM', at: 5_000_000_000_000 }, { type: 'DISARM' }, { type: 'GET' }] as const;
// The count grows without end; paths are over the state value and whether a deadline is set.
const serializeState = (s: any) => JSON.stringify([s.value, s.context.deadline !== null]);

t.test('counter: every state and transition is reachable, and each path replays on a real actor', async (t) => {
  const paths = getShortestPaths(counterMachine, { events: [...events], serializeState });
  t.same([...new Set(paths.map((p) => JSON.stringify(p.state.value)))].sort(), ['"armed"', '"idle"']);
  const simple = getSimplePaths(counterMachine, { events: [...events], serializeState });
  t.ok(simple.length >= paths.length);
  for (const path of simple) {
    const actor = createActor(counterMachine.provide({ actors: { sleepUntil } }));
    actor.start();
    for (const step of path.steps) actor.send(step.event as never);
    t.same(actor.getSnapshot().value, path.state.value, `replays: ${path.steps.map((s) => s.event.type).join(' → ') || '(start)'}`);
    actor.stop();
  }
});

t.test('counter: the timer path (armed → fired → idle), with the deadline in the persisted snapshot', async (t) => {
  const actor = createActor(counterMachine.provide({ actors: { sleepUntil } }));
  actor.start();
  const at = Date.now() + 30;
  actor.send({ type: 'ARM', at });
  t.equal(earliestDeadline(actor.getPersistedSnapshot()), at, 'the armed deadline is found in the snapshot');
  const done = await waitFor(actor, (s) => s.context.fired === 1, { timeout: 5000 });
  t.equal(done.value, 'idle');
  t.ok(done.context.firedAt! >= at);
  t.equal(earliestDeadline(actor.getPersistedSnapshot()), null, 'nothing pending after it fired');
  actor.send({ type: 'ARM', at: Date.now() + 60_000 });
  actor.send({ type: 'DISARM' });
  t.equal(earliestDeadline(actor.getPersistedSnapshot()), null, 'disarmed: nothing pending');
  actor.stop();
});

t.test('counter: a restored snapshot re-arms its timer for what is left', async (t) => {
  const fired: number[] = [];
  const spy = fromPromise<number, { until: number }>(async ({ input }) => {
    fired.push(input.until);
    return input.until;
  });
  const first = createActor(counterMachine.provide({ actors: { sleepUntil: spy } }));
  first.start();
  first.send({ type: 'ARM', at: 1234 });
  const persisted = first.getPersistedSnapshot();
  first.stop();
  const restored = createActor(counterMachine.provide({ actors: { sleepUntil: spy } }), { snapshot: persisted as never });
  restored.start();
  await waitFor(restored, (s) => s.context.fired === 1, { timeout: 5000 });
  t.same(fired.slice(-1), [1234], 'the restored timer got the original absolute deadline');
  restored.stop();
});
