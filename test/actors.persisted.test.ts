/**
 * The host's persisted snapshot (`actors/persisted.ts`) is XState's own: equal, and the same bytes once encoded
 * (the same keys in the same order), after every step of a shortest path to every state each machine of the
 * catalog reaches with its sample events (test/fixtures/machine-events.ts), its invoked effects running.
 */
import t from 'tap';
import { assign, createActor, fromPromise, setup } from 'xstate';
import { getShortestPaths } from 'xstate/graph';
import { MACHINES } from '../machines/catalog.js';
import { persistedSnapshot } from '../actors/persisted.js';
import { Packr } from 'msgpackr';
import { MACHINE_EVENTS } from './fixtures/machine-events.js';
import { inert } from './helpers/coverage.js';

/** Encodes with records, so that two objects with their keys in different orders differ. */
const packr = new Packr({ useRecords: true });
const encodeSnapshot = (value: unknown) => packr.pack(value);

for (const kind of Object.keys(MACHINES).sort()) {
  t.test(`${kind}: the persisted snapshot is XState's on every path`, async (t) => {
    const sample = MACHINE_EVENTS[kind];
    const m = inert(MACHINES[kind]);
    let steps = 0;
    let withChildren = 0;
    const mismatches: string[] = [];
    for (const input of sample.inputs ?? [sample.input]) {
      const paths = getShortestPaths(m, { events: sample.events, serializeState: sample.serializeState ?? ((s: any) => JSON.stringify([s.value, s.context])), input } as any);
      for (const path of paths) {
        const actor = createActor(m, { input } as any);
        actor.subscribe({ error: () => undefined });
        actor.start();
        for (const step of [null, ...path.steps]) {
          if (step) actor.send(step.event as any);
          if (actor.getSnapshot().status === 'error') break;
          const ours = persistedSnapshot(actor);
          const theirs = actor.getPersistedSnapshot();
          steps++;
          if (Object.keys(actor.getSnapshot().children).length > 0) withChildren++;
          if (Buffer.compare(Buffer.from(encodeSnapshot(ours)), Buffer.from(encodeSnapshot(theirs))) !== 0) mismatches.push(JSON.stringify(actor.getSnapshot().value));
        }
        actor.stop();
      }
    }
    t.same(mismatches, [], `${kind}: states whose persisted snapshot differs from XState's`);
    t.ok(steps > 0 && withChildren > 0, `${kind}: ${steps} snapshots compared, ${withChildren} with effects running`);
  });
}

t.test('an actor reference kept in a context is stored as XState stores it', async (t) => {
  // None of our machines spawns into its context; if one did, the encoder writes the reference by the actor's
  // toJSON, which is XState's own persisted form of it.
  const machine = setup({ actors: { forever: fromPromise(() => new Promise<never>(() => undefined)) } }).createMachine({
    context: { child: null as unknown },
    entry: assign({ child: ({ spawn }) => spawn('forever', { id: 'kept' }) }),
  });
  const actor = createActor(machine).start();
  const ours = Buffer.from(encodeSnapshot(persistedSnapshot(actor)));
  const theirs = Buffer.from(encodeSnapshot(actor.getPersistedSnapshot()));
  t.not(persistedSnapshot(actor), actor.getPersistedSnapshot(), 'the objects differ (ours holds the actor itself)');
  t.equal(Buffer.compare(ours, theirs), 0, 'the stored bytes are the same');
  actor.stop();
});
