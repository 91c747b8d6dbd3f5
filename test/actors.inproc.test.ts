import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeSnapshot, startRuntime, builtinKinds, type ActorKind, type JournalEntry, type Runtime } from '../actors/mod.js';
import { counterMachine } from '../machines/counter.js';
import { sleepUntil } from '../actors/timers.js';
import { openStore, type Store } from '../store/mod.js';
import { assign, setup } from 'xstate';
import { actorBehaviour, eventually, type Cluster } from './actors.behaviour.js';
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
/**
 * A kind whose deadline the host keeps (`ActorKind.deadline`): `ARM` sets it, the host's `EXPIRE` fires it
 * once it has passed (the machine's guard checks, as the conversation's idle timeout does).
 */
const expiringMachine = setup({
  types: {} as { context: { deadline: number | null; fired: number; firedAt: number | null }; events: { type: 'ARM'; at: number } | { type: 'EXPIRE'; at: number } },
}).createMachine({
  context: { deadline: null, fired: 0, firedAt: null },
  on: {
    ARM: { actions: assign({ deadline: ({ event }) => event.at }) },
    EXPIRE: {
      guard: ({ context, event }) => context.deadline !== null && event.at >= context.deadline,
      actions: assign({ deadline: null, fired: ({ context }) => context.fired + 1, firedAt: ({ event }) => event.at }),
    },
  },
});
const expiring: ActorKind = {
  name: 'expiring',
  machine: expiringMachine,
  reply: (s) => s.context,
  deadline: { name: 'expiry', of: (s) => s.context.deadline, event: (at) => ({ type: 'EXPIRE', at }) },
};
let store: Store;
let runtime: Runtime;
let dir: string;

t.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sb-actors-'));
  store = await openStore({ dataDir: dir });
  runtime = await startRuntime({ store, worker: true, shardCount: 16, leaseTtlMs: 3000, passivateAfterMs: PASSIVATE_MS, askTimeoutMs: 5000, kinds: builtinKinds([echo, expiring]) });
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

t.test("a kind's deadline: kept by the host, fired once passed, moved on without firing early, stored for the inspector", async (t) => {
  const at = Date.now() + 400;
  await runtime.client.ask('expiring', 'e-live', { type: 'ARM', at });
  t.match((await store.snapshots.get('expiring/e-live').then((r) => describeSnapshot(r!))).deadlines, [{ id: 'expiry', until: new Date(at).toISOString() }]);
  t.ok(await eventually(async () => ((await store.snapshots.get('expiring/e-live').then((r) => describeSnapshot(r!))).context as any).fired === 1, 5000), 'fired');
  const fired = (await store.snapshots.get('expiring/e-live').then((r) => describeSnapshot(r!))).context as any;
  t.ok(fired.firedAt >= at, 'not before its deadline');
  t.same((await store.snapshots.get('expiring/e-live').then((r) => describeSnapshot(r!))).deadlines, [], 'none pending after it fired');

  const first = Date.now() + 300;
  const later = first + 900;
  await runtime.client.ask('expiring', 'e-moved', { type: 'ARM', at: first });
  await runtime.client.ask('expiring', 'e-moved', { type: 'ARM', at: later });
  await new Promise((r) => setTimeout(r, later - 300 - Date.now()));
  t.equal(((await runtime.client.ask('expiring', 'e-moved', { type: 'ARM', at: later })) as any).fired, 0, 'the earlier deadline, moved on, did not fire');
  t.ok(await eventually(async () => ((await store.snapshots.get('expiring/e-moved').then((r) => describeSnapshot(r!))).context as any).fired === 1, 5000));
});

t.test("a kind's deadline wakes a passivated actor", async (t) => {
  const at = Date.now() + PASSIVATE_MS + 1500;
  await runtime.client.ask('expiring', 'e-asleep', { type: 'ARM', at });
  t.ok(await eventually(async () => runtime.host!.liveActorsByKind().expiring === undefined || runtime.host!.liveActorsByKind().expiring === 0, 5000), 'passivated before its deadline');
  const context = await eventually(async () => {
    const c = (await store.snapshots.get('expiring/e-asleep').then((r) => describeSnapshot(r!))).context as any;
    return c.fired === 1 ? c : undefined;
  }, 20_000);
  t.ok(context, 'woken and fired');
  t.ok(context.firedAt >= at, 'at its deadline, not before');
});
