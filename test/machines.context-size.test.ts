/**
 * Every machine's context stays under 20 top-level fields. XState copies the context on every assign with
 * `Object.assign({}, context, update)`, and V8 turns an object built that way into a dictionary once it has 20
 * or more properties: each later assign then copies a dictionary, more than ten times the work of copying a
 * fast object. V8's own verdict on such a copy is checked too, so the limit moves if V8's does.
 */
import { execFileSync } from 'node:child_process';
import t from 'tap';
import { createActor } from 'xstate';
import { MACHINES } from '../machines/catalog.js';
import { MACHINE_EVENTS } from './fixtures/machine-events.js';

const LIMIT = 20;

for (const kind of Object.keys(MACHINES).sort()) {
  t.test(`${kind}: fewer than ${LIMIT} context fields`, async (t) => {
    const actor = createActor(MACHINES[kind], { input: MACHINE_EVENTS[kind].input });
    const context = actor.getSnapshot().context as Record<string, unknown>;
    const fields = Object.keys(context);
    t.ok(fields.length < LIMIT, `${kind} has ${fields.length} context fields: ${fields.join(', ')}`);
  });
}

t.test('the limit is where V8 makes such a copy a dictionary', async (t) => {
  // Asked of V8 itself (%HasFastProperties, in a child process allowed natives syntax), not timed.
  const probe = `const copy = (n) => { let c = {}; for (let i = 0; i < n; i++) c['f' + i] = i; for (let i = 0; i < 3; i++) c = Object.assign({}, c, { f1: i }); return c; };
    console.log(JSON.stringify([%HasFastProperties(copy(${LIMIT - 1})), %HasFastProperties(copy(${LIMIT}))]));`;
  const out = execFileSync(process.execPath, ['--allow-natives-syntax', '-e', probe], { encoding: 'utf8' });
  t.same(JSON.parse(out), [true, false], `a copy of ${LIMIT - 1} fields keeps fast properties, one of ${LIMIT} does not`);
});
