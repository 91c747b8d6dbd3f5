import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeSnapshot, startRuntime, builtinKinds, type ActorKind, type JournalEntry, type Runtime } from '../actors/mod.js';
import { counterMachine } from '../machines/counter.js';
import { sleepUntil } from '../actors/timers.js';
import { openStore, type Store } from '../store/mod.js';
import { actorBehaviour, type Cluster } from './actors.behaviour.js';
import { removeDir } from './helpers/platform.js';

const PASSIVATE_MS = 300;
/** What the `echo` kind's `published` hook was told, with whether the entry was in the journal by then. */
const published: Array<{ id: string; entry: JournalEntry }> = [];
/** A counter whose answer is what the step emitted, and which records what it is told was published. */
const echo: ActorKind = {
  name: 'echo',
  machine: counterMachine.provide({ actors: { sleepUntil } }),
  reply: (_snapshot, _event, emitted) => ({ emitted }),
  published: (id, entry) => published.push({ id, entry }),
};
let store: Store;
let runtime: Runtime;
let dir: string;

t.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sb-actors-'));
  store = await openStore({ dataDir: dir });
  runtime = await startRuntime({ store, worker: true, shardCount: 16, leaseTtlMs: 3000, passivateAfterMs: PASSIVATE_MS, askTimeoutMs: 5000, kinds: builtinKinds([echo]) });
});
t.teardown(async () => {
  await runtime.stop();
  await store.close();
  removeDir(dir);
});

const cluster = (): Cluster => ({
  client: runtime.client,
  describe: async (kind, id) => {
    const r = await store.snapshots.get(`${kind}/${id}`);
    return r && describeSnapshot(r);
  },
  liveActors: async () => runtime.host!.liveActors,
  passivationDelayMs: PASSIVATE_MS,
});

actorBehaviour(t, cluster);

t.test('the in-process worker owns every shard', async (t) => {
  const [w] = await runtime.directory.workers();
  t.equal(w.shards.length, 16);
  t.equal(runtime.transport.kind, 'inproc');
});

t.test('group commit: concurrent events share durable commits', async (t) => {
  const before = runtime.host!.commitStats;
  await Promise.all(Array.from({ length: 200 }, (_, i) => runtime.client.ask('counter', `gc-${i}`, { type: 'INC' })));
  const after = runtime.host!.commitStats;
  t.equal(after.writes - before.writes, 200, 'every event wrote its snapshot');
  t.ok(after.batches - before.batches < 200, `in fewer commits (${after.batches - before.batches})`);
});

t.test('each step is journaled with what the machine emitted', async (t) => {
  const id = 'journaled';
  for (let i = 0; i < 3; i++) await runtime.client.ask('counter', id, { type: 'INC' });
  await runtime.client.ask('counter', id, { type: 'ARM', at: Date.now() + 60_000 });
  const entries = await store.journal.ofActor(`counter/${id}`);
  t.same(entries.map((e) => e.version), [1, 2, 3, 4], 'one entry per snapshot version');
  t.same(entries.map((e) => e.events), [
    [{ type: 'counter.incremented', data: { count: 1 } }],
    [{ type: 'counter.incremented', data: { count: 2 } }],
    [{ type: 'counter.incremented', data: { count: 3 } }],
    [],
  ], 'the emitted events; a step that emitted nothing still has its entry');
  t.same(entries.map((e) => e.value), ['idle', 'idle', 'idle', 'armed'], 'the state value after each step');
  t.match(entries[0], { kind: 'counter', id, key: `counter/${id}`, shard: Number });
  await runtime.client.ask('counter', id, { type: 'DISARM' });
});

t.test('the reply is derived from the committed events, and published hears of each durable entry', async (t) => {
  const id = 'echoed';
  const reply = await runtime.client.ask<{ emitted: unknown }>('echo', id, { type: 'INC' });
  t.same(reply.emitted, [{ type: 'counter.incremented', data: { count: 1 } }]);
  const again = await runtime.client.ask<{ emitted: unknown }>('echo', id, { type: 'GET' });
  t.same(again.emitted, [], 'a step that emitted nothing');
  const mine = published.filter((p) => p.id === id);
  t.same(mine.map((p) => p.entry.version), [1, 2], 'every committed step, in order');
  const stored = await store.journal.ofActor(`echo/${id}`);
  t.same(mine.map((p) => p.entry), stored, 'exactly the journaled entries (seq, time, value, events)');
});

t.test('an emitted event is journaled as {type, data}', async (t) => {
  const { journalEvent } = await import('../actors/activation.js');
  t.same(journalEvent({ type: 'a', data: { x: 1 } }), { type: 'a', data: { x: 1 } }, 'its data as given');
  t.same(journalEvent({ type: 'b', x: 1, y: 'z' }), { type: 'b', data: { x: 1, y: 'z' } }, 'flat fields become its data');
  t.same(journalEvent({ type: 'c', data: 5, n: 2 }), { type: 'c', data: { data: 5, n: 2 } }, 'a data field beside others is one of its fields');
  t.same(journalEvent({ type: 'd' }), { type: 'd', data: {} });
});
