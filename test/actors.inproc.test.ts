import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ActorClient, decode, describeSnapshot, startRuntime, builtinKinds, type ActorKind, type JournalEntry, type Runtime } from '../actors/mod.js';
import { createInprocTransport } from '../actors/transport/mod.js';
import { counterMachine } from '../machines/counter.js';
import { sleepUntil } from '../actors/timers.js';
import { openStore, type Store } from '../store/mod.js';
import { assign, createActor, setup } from 'xstate';
import type { PersistedActor } from '../actors/protocol.js';
import { actorBehaviour, type Cluster } from './actors.behaviour.js';
import { eventually } from './helpers/eventually.js';
import { expiring } from './helpers/expiring-kind.js';
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
 * A kind whose work the host runs (`ActorKind.effect`): `WORK` enters `working` (tagged `work`), the host
 * runs the effect with the job and sends `WORKED` with its output. A job named `fail…` rejects.
 */
const workingMachine = setup({
  types: {} as {
    context: { job: string | null; results: string[] };
    events: { type: 'WORK'; job: string } | { type: 'WORKED'; output: string } | { type: 'WORK_FAILED'; error: unknown };
  },
}).createMachine({
  context: { job: null, results: [] },
  initial: 'idle',
  states: {
    idle: { on: { WORK: { target: 'working', actions: assign({ job: ({ event }) => event.job }) } } },
    working: {
      tags: ['busy', 'work'],
      on: {
        WORKED: { target: 'idle', actions: assign({ job: null, results: ({ context, event }) => [...context.results, event.output] }) },
        WORK_FAILED: { target: 'idle', actions: assign({ job: null, results: ({ context, event }) => [...context.results, `failed: ${String(event.error)}`] }) },
      },
    },
  },
});
/** The jobs the `working` kind's effect was run with, in order. */
const effectRuns: string[] = [];
const working: ActorKind = {
  name: 'working',
  machine: workingMachine,
  settled: (s) => !s.hasTag('busy'),
  reply: (s) => ({ state: s.value, ...s.context }),
  effect: {
    tag: 'work',
    input: (context) => context.job,
    run: async (job: string) => {
      effectRuns.push(job);
      await new Promise((r) => setTimeout(r, 5));
      if (job.startsWith('fail')) throw new Error(`${job} failed`);
      return `did ${job}`;
    },
    done: (output: string) => ({ type: 'WORKED', output }),
  },
};
/** The same machine, whose effect takes 400 ms for a job named `slow…` (a mailbox with a backlog behind it). */
const slow: ActorKind = {
  ...working,
  name: 'slow',
  effect: {
    ...working.effect!,
    run: async (job: string) => {
      effectRuns.push(job);
      await new Promise((r) => setTimeout(r, job.startsWith('slow') ? 400 : 5));
      return `did ${job}`;
    },
  },
};
/** The same machine, whose kind maps the effect's failure to an event (`failed`), as an invoke's `onError` would. */
const tolerant: ActorKind = { ...working, name: 'tolerant', effect: { ...working.effect!, failed: (error) => ({ type: 'WORK_FAILED', error }) } };
let store: Store;
let runtime: Runtime;
let dir: string;

t.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sb-actors-'));
  store = await openStore({ dataDir: dir });
  runtime = await startRuntime({ store, worker: true, shardCount: 16, leaseTtlMs: 3000, passivateAfterMs: PASSIVATE_MS, askTimeoutMs: 5000, kinds: builtinKinds([echo, expiring, working, tolerant, slow]) });
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

t.test('in-process asks carry values, not bytes: a retried ask answers with the very reply the actor remembered', async (t) => {
  const eventId = 'retried-once';
  const first = await runtime.client.ask<object>('echo', 'by-value', { type: 'INC' }, { eventId });
  const retried = await runtime.client.ask<object>('echo', 'by-value', { type: 'INC' }, { eventId });
  t.equal(retried, first, 'the same object: neither encoded nor decoded on the way');
  t.same(retried, { emitted: [{ type: 'counter.incremented', data: { count: 1 } }] }, 'applied once');
});

t.test('a step\'s answer is journaled with it; the snapshot keeps the event id and the version that applied it', async (t) => {
  const eventId = 'answer-journaled';
  const answer = await runtime.client.ask<object>('echo', 'answers', { type: 'INC' }, { eventId });
  const stored = await store.snapshots.get('echo/answers');
  t.same((stored!.data as PersistedActor).a, [[eventId, 1]], 'no answer in the snapshot');
  const [entry] = await store.journal.ofActor('echo/answers');
  t.same(entry.reply, answer, 'the answer is in the journal entry of version 1');
  // A step no event began (the timer's transition, committed on its own) carries no answer.
  await runtime.client.ask('echo', 'answers', { type: 'ARM', at: Date.now() + 20 });
  t.ok(await eventually(async () => (await store.journal.ofActor('echo/answers')).length === 3, 5000), 'the timer fired');
  const entries = await store.journal.ofActor('echo/answers');
  t.same(entries.map((e) => 'reply' in e), [true, true, false]);
});

t.test('an ask without an event id gets a fresh one, about half a UUID long', async (t) => {
  await runtime.client.ask('echo', 'fresh-ids', { type: 'INC' });
  await runtime.client.ask('echo', 'fresh-ids', { type: 'INC' });
  const { a } = (await store.snapshots.get('echo/fresh-ids'))!.data as PersistedActor;
  t.equal(a.length, 2, 'two events applied: each ask had its own id');
  t.not(a[0][0], a[1][0]);
  for (const [id] of a) t.ok(/^[A-Za-z0-9_-]{17,27}$/.test(id), `${id}: base64url and base 36, under 36 characters`);
});

t.test('a retry whose answer is not in the journal is refused, not applied again', async (t) => {
  // A snapshot that says event `lost` applied version 1, with no journal entry behind it.
  const machine = createActor(counterMachine.provide({ actors: { sleepUntil } })).start();
  const data: PersistedActor = { s: machine.getPersistedSnapshot(), a: [['lost', 1]] };
  machine.stop();
  const written = await store.snapshots.put('counter/no-answer', data, { expectedVersion: 0, fence: 0, shard: 0, deadline: null });
  t.ok(written.ok);
  const refused = await runtime.client.ask('counter', 'no-answer', { type: 'INC' }, { eventId: 'lost' }).catch((err) => err);
  t.match(refused, { code: 'STORE_ERROR', message: /the answer to event lost is not in the journal/ });
  t.equal((await runtime.client.ask<{ count: number }>('counter', 'no-answer', { type: 'INC' })).count, 1, 'the retried event was not applied');
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

t.test("a kind's effect: run by the host, its outcome sent back, one step committed once it settled", async (t) => {
  const reply = await runtime.client.ask<{ state: string; results: string[] }>('working', 'w-1', { type: 'WORK', job: 'a' });
  t.same(reply, { state: 'idle', job: null, results: ['did a'] }, 'the ask waited for the effect');
  t.same(effectRuns.filter((j) => j === 'a'), ['a'], 'run once');
  const entries = await store.journal.ofActor('working/w-1');
  t.same(entries.map((e) => [e.version, e.value]), [[1, 'idle']], 'one durable step, after the effect');
  const again = await runtime.client.ask<{ results: string[] }>('working', 'w-1', { type: 'WORK', job: 'b' });
  t.same(again.results, ['did a', 'did b'], 'and again on the next step');
});

t.test("a kind's effect that fails fails the actor's step as an invoke without onError does; the next ask starts afresh", async (t) => {
  await t.rejects(runtime.client.ask('working', 'w-fail', { type: 'WORK', job: 'fail-1' }), { name: 'ActorAskError', code: 'ACTOR_ERROR', message: /fail-1 failed/ });
  t.equal(await store.snapshots.get('working/w-fail'), null, 'nothing of the failed step was stored');
  const reply = await runtime.client.ask<{ results: string[] }>('working', 'w-fail', { type: 'WORK', job: 'c' });
  t.same(reply.results, ['did c']);
});

t.test("a kind's effect that fails, with `failed`: the actor hears of it as an event and the step goes on", async (t) => {
  const reply = await runtime.client.ask<{ state: string; results: string[] }>('tolerant', 't-1', { type: 'WORK', job: 'fail-2' });
  t.same(reply, { state: 'idle', job: null, results: ['failed: Error: fail-2 failed'] });
  t.same((await store.journal.ofActor('tolerant/t-1')).map((e) => e.value), ['idle'], 'committed as one step');
});

t.test("a kind's effect runs again for a snapshot stored while it ran, as a restored invoke restarts", async (t) => {
  const local = createActor(workingMachine).start();
  local.send({ type: 'WORK', job: 'restored' });
  const data: PersistedActor = { s: local.getPersistedSnapshot(), a: [] };
  local.stop();
  t.ok((await store.snapshots.put('working/w-restored', data, { expectedVersion: 0, fence: 0, shard: 0, deadline: null })).ok);
  // Any event activates it; in `working` a WORK changes nothing, and the ask waits for the step to settle.
  const reply = await runtime.client.ask<{ state: string; results: string[] }>('working', 'w-restored', { type: 'WORK', job: 'ignored' });
  t.same(reply, { state: 'idle', job: null, results: ['did restored'] });
  t.same(effectRuns.filter((j) => j === 'restored' || j === 'ignored'), ['restored']);
});

t.test('an event whose asker gave up is not applied: the mailbox sheds it, and the host counts it', async (t) => {
  const expired = () => runtime.host!.expiredByKind.slow ?? 0;
  const before = expired();
  const first = runtime.client.ask<{ results: string[] }>('slow', 'shed', { type: 'WORK', job: 'slow-1' });
  // Queued behind the 400 ms step; its asker gives up after 100 ms.
  const started = performance.now();
  await t.rejects(runtime.client.ask('slow', 'shed', { type: 'WORK', job: 'late' }, { timeoutMs: 100 }), { code: 'DEADLINE' });
  t.ok(performance.now() - started < 350, 'the asker gave up while the first step still ran');
  t.same((await first).results, ['did slow-1']);
  const next = await runtime.client.ask<{ results: string[] }>('slow', 'shed', { type: 'WORK', job: 'next' });
  t.same(next.results, ['did slow-1', 'did next'], 'the late event was never applied');
  t.notOk(effectRuns.includes('late'), 'nor did its effect run');
  t.equal(expired(), before + 1, 'counted once');
  // The same backlog with an asker that waits: applied in turn.
  const a = runtime.client.ask('slow', 'kept', { type: 'WORK', job: 'slow-2' });
  const b = await runtime.client.ask<{ results: string[] }>('slow', 'kept', { type: 'WORK', job: 'waited' }, { timeoutMs: 5000 });
  await a;
  t.same(b.results, ['did slow-2', 'did waited']);
  t.equal(expired(), before + 1, 'nothing more expired');
});

t.test('each attempt carries what is left of the whole ask\'s deadline, not its own timeout', async (t) => {
  // A host that never answers: the client retries every 2 s at most, and each attempt says how long it may still wait.
  const transport = createInprocTransport();
  const seen: Array<{ waitMs: number; eventId: string; at: number }> = [];
  transport.subscribe('sb.actors.*', (data) => seen.push({ ...decode<{ waitMs: number; eventId: string }>(data), at: performance.now() }));
  const client = new ActorClient(transport, { shardCount: 16, timeoutMs: 5000 });
  const started = performance.now();
  await t.rejects(client.ask('counter', 'silent', { type: 'INC' }, { timeoutMs: 4500 }), { code: 'DEADLINE' });
  await transport.close();
  t.ok(seen.length >= 2, `retried (${seen.length} attempts)`);
  t.equal(new Set(seen.map((s) => s.eventId)).size, 1, 'with one event id');
  t.ok(seen[0].waitMs > 4400 && seen[0].waitMs <= 4500, `the first attempt may wait the whole deadline (${seen[0].waitMs} ms), beyond its own 2 s`);
  for (const s of seen) {
    const left = 4500 - (s.at - started);
    t.ok(Math.abs(s.waitMs - left) < 100, `each later one what is left of it (${Math.round(s.waitMs)} ms, ${Math.round(left)} left)`);
  }
});

t.test('after an overload its askers gave up on, a fresh ask is answered at once, not behind the backlog', async (t) => {
  const expired = () => runtime.host!.expiredByKind.slow ?? 0;
  const before = expired();
  // 400 asks at once on one actor whose steps take over 5 ms each: seconds of work, asked for 300 ms.
  const burst = await Promise.allSettled(Array.from({ length: 400 }, (_, i) => runtime.client.ask('slow', 'overloaded', { type: 'WORK', job: `burst-${i}` }, { timeoutMs: 300 })));
  const answered = burst.filter((r) => r.status === 'fulfilled').length;
  t.ok(answered < 400, `most askers gave up (${400 - answered} of 400)`);
  const started = performance.now();
  const fresh = await runtime.client.ask<{ results: string[] }>('slow', 'overloaded', { type: 'WORK', job: 'fresh' }, { timeoutMs: 1000 });
  t.ok(performance.now() - started < 1000, 'answered within its own deadline');
  const applied = fresh.results.length - 1;
  t.equal(fresh.results.at(-1), 'did fresh');
  t.equal(applied + (expired() - before), 400, `each burst event either applied (${applied}) or shed (${expired() - before})`);
  t.ok(applied >= answered, 'every answered one applied');
});

t.test('an ask given longer than the usual time still ends at the usual time when no one owns its actor', async (t) => {
  // No subscriber at all: every attempt finds no responders. The client's usual time is 300 ms; the ask's 30 s.
  const transport = createInprocTransport();
  const client = new ActorClient(transport, { shardCount: 16, timeoutMs: 300 });
  await t.rejects(client.ask('counter', 'orphan', { type: 'INC' }, { timeoutMs: 30_000 }), { code: 'DEADLINE', message: /no owner for 300 ms/ });
  await transport.close();
});
