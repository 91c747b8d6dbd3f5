import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { fromPromise, setup } from 'xstate';
import { builtinKinds, startRuntime, type ActorKind, type Runtime } from '../actors/mod.js';
import { openStore, type Store } from '../store/mod.js';
import { removeDir } from './helpers/platform.js';

// The host's actors share one XState system (`actors/actor-system.ts`): what an idle actor costs in memory,
// that a passivated one leaves nothing in that system, and that a machine with a system id is refused.

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
/** Heap in use after full collections. */
const heap = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

/** A machine that invokes with a system id, which every actor of a host would share. */
const namedChild: ActorKind = {
  name: 'named-child',
  machine: setup({ actors: { work: fromPromise(async () => 1) } }).createMachine({
    initial: 'busy',
    states: { busy: { invoke: { src: 'work', systemId: 'worker' } } },
  }),
};

const dir = mkdtempSync(join(tmpdir(), 'sb-system-'));
let store: Store;
let runtime: Runtime;
const ACTORS = 5000;
const ask = (prefix: string, from: number, count: number) =>
  Promise.all(Array.from({ length: count }, (_, i) => runtime.client.ask('counter', `${prefix}${from + i}`, { type: 'INC' })));

t.before(async () => {
  store = await openStore({ dataDir: dir });
  runtime = await startRuntime({ store, worker: true, shardCount: 16, leaseTtlMs: 3000, passivateAfterMs: 3_600_000, askTimeoutMs: 10_000, kinds: builtinKinds() });
  // Warm: the code paths compiled and the store's pages touched before anything is measured.
  for (let i = 0; i < 1000; i += 250) await ask('warm', i, 250);
  await runtime.host!.passivateIdle();
});
t.teardown(async () => {
  await runtime.stop();
  await store.close();
  removeDir(dir);
});

t.test('a live idle actor costs under 5 KB of heap (the actor runtime target), and a passivated one nothing', async (t) => {
  const base = heap();
  for (let i = 0; i < ACTORS; i += 500) await ask('idle', i, 500);
  t.equal(runtime.host!.liveActors, ACTORS);
  const perLive = (heap() - base) / ACTORS;
  t.ok(perLive < 5 * 1024, `${Math.round(perLive)} bytes per live idle actor`);
  await runtime.host!.passivateIdle();
  t.equal(runtime.host!.liveActors, 0);
  // The shared system forgets an actor when it stops. One its registry kept would keep all of its 4 KB; what
  // is left besides (under a kilobyte each) is the store's and the heap's, not the actor's.
  const perPassivated = (heap() - base) / ACTORS;
  t.ok(perPassivated < 1024, `${Math.round(perPassivated)} bytes left per passivated actor`);
});

t.test('a kind whose machine invokes with a system id is refused when the runtime starts', async (t) => {
  const other = await openStore({ dataDir: join(dir, 'other') });
  t.teardown(() => other.close());
  await t.rejects(
    startRuntime({ store: other, worker: true, shardCount: 4, leaseTtlMs: 3000, passivateAfterMs: 1000, askTimeoutMs: 1000, kinds: builtinKinds([namedChild]) }),
    { message: /actor kind named-child: state \(machine\)\.busy invokes an actor with a system id/ },
  );
});
