import t from 'tap';
import { createMachine } from 'xstate';
import { MACHINES } from '../machines/catalog.js';
import { MACHINE_EVENTS } from './fixtures/machine-events.js';
import { transitionCoverage } from './helpers/coverage.js';

// Every transition of every machine in machines/catalog.ts is taken by a real actor replaying a path that
// xstate/graph generated (test/helpers/coverage.ts). The report lists each machine's figure; anything less
// than 100 % fails, naming the transitions no path reached.

t.test('every machine of the catalog has event samples', async (t) => {
  t.same(Object.keys(MACHINE_EVENTS).sort(), Object.keys(MACHINES).sort(), 'test/fixtures/machine-events.ts covers machines/catalog.ts');
});

for (const kind of Object.keys(MACHINES).sort()) {
  t.test(`${kind}: 100 % of transitions covered by generated paths`, async (t) => {
    const sample = MACHINE_EVENTS[kind];
    if (!sample) return t.fail(`no event samples for ${kind} in test/fixtures/machine-events.ts`);
    const c = transitionCoverage(MACHINES[kind], sample);
    t.comment(`${kind}: ${c.covered.length}/${c.total} transitions (${((100 * c.covered.length) / c.total).toFixed(1)} %) over ${c.paths} paths`);
    t.same(c.missing, [], `${kind}: transitions no path reached`);
    t.equal(c.covered.length, c.total);
  });
}

t.test('the check fails when a transition is unreached', async (t) => {
  const machine = createMachine({
    id: 'probe',
    initial: 'a',
    states: { a: { on: { GO: 'b', SKIP: 'c' } }, b: { on: { BACK: 'a' } }, c: {} },
  });
  const partial = transitionCoverage(machine, { events: [{ type: 'GO' }, { type: 'BACK' }] });
  t.same(partial.missing, ['probe.a:SKIP:0'], 'the transition no sample event takes is reported');
  t.equal(partial.covered.length, 2);
  const full = transitionCoverage(machine, { events: [{ type: 'GO' }, { type: 'BACK' }, { type: 'SKIP' }] });
  t.same(full.missing, []);
});
