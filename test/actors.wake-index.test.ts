/**
 * The wake-up index (`actors/wake-index.ts`): a step that moves an actor's deadline later keeps its index
 * entry; an entry that comes due before the real deadline is moved to it, whether the actor is passivated or
 * live; the deadline itself still fires on time, once.
 */
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { assign, setup } from 'xstate';
import { builtinKinds, describeSnapshot, startRuntime, type ActorKind, type Runtime } from '../actors/mod.js';
import { WAKE_INDEX_REFRESH_MS, wakeIndexTime } from '../actors/wake-index.js';
import type { Store } from '../store/mod.js';
import { eventually } from './helpers/eventually.js';
import { expiring } from './helpers/expiring-kind.js';
import { storeFor } from './helpers/store.js';

const SHARDS = 4;
/** The `expiring` machine with work the host runs for it (`ActorKind.effect`): `WORK` holds the mailbox for 1.5 s. */
const slowMachine = setup({
  types: {} as { context: { deadline: number | null }; events: { type: 'ARM'; at: number } | { type: 'EXPIRE'; at: number } | { type: 'WORK' } | { type: 'WORKED' } },
}).createMachine({
  context: { deadline: null },
  initial: 'idle',
  on: { ARM: { actions: assign({ deadline: ({ event }) => event.at }) } },
  states: { idle: { on: { WORK: 'working' } }, working: { tags: ['work'], on: { WORKED: 'idle' } } },
});
const slow: ActorKind = {
  name: 'slow',
  machine: slowMachine,
  settled: (s) => !s.hasTag('work'),
  reply: (s) => s.context,
  deadline: { name: 'expiry', of: (s) => s.context.deadline, event: (at) => ({ type: 'EXPIRE', at }) },
  effect: { tag: 'work', input: () => null, run: () => sleep(1500), done: () => ({ type: 'WORKED' }) },
};
/**
 * A kind whose effect resumes at once (`KindEffect.resumeAtOnce`, as a messaging session's reply does) and that
 * no ask waits for (settled right after the event): `WORK` starts 600 ms of work outside the mailbox.
 */
let resumingRuns = 0;
const resuming: ActorKind = {
  name: 'resuming',
  machine: setup({ types: {} as { context: Record<string, never>; events: { type: 'WORK' } | { type: 'WORKED' } } }).createMachine({
    context: {},
    initial: 'idle',
    states: { idle: { on: { WORK: 'working' } }, working: { tags: ['work'], on: { WORKED: 'idle' } } },
  }),
  reply: () => null,
  effect: { tag: 'work', input: () => null, run: () => (resumingRuns++, sleep(600)), done: () => ({ type: 'WORKED' }), resumeAtOnce: true },
};
/** `resuming` with work that lasts until the test lets it end (`release`). */
let release: () => void = () => {};
let held = new Promise<void>((r) => (release = r));
const holding: ActorKind = { ...resuming, name: 'holding', effect: { ...resuming.effect!, run: () => held } };
/** A kind whose deadline stays due once it has passed: its machine ignores the host's `EXPIRE`. */
const stubborn: ActorKind = {
  name: 'stubborn',
  machine: setup({ types: {} as { context: { deadline: number | null }; events: { type: 'ARM'; at: number } | { type: 'EXPIRE'; at: number } } }).createMachine({
    context: { deadline: null },
    on: { ARM: { actions: assign({ deadline: ({ event }) => event.at }) } },
  }),
  reply: (s) => s.context,
  deadline: { name: 'expiry', of: (s) => s.context.deadline, event: (at) => ({ type: 'EXPIRE', at }) },
};

async function runtimeFor(t: Test, opts: { passivateAfterMs: number; wakeIndexRefreshMs?: number; wakeScanLimit?: number }): Promise<{ store: Store; runtime: Runtime }> {
  const store = await storeFor(t, 'sb-wake-index-');
  const runtime = await startRuntime({ store, worker: true, shardCount: SHARDS, leaseTtlMs: 3000, askTimeoutMs: 5000, kinds: builtinKinds([expiring, stubborn, slow, resuming, holding]), ...opts });
  // Teardowns run last first: the runtime stops before storeFor closes the store.
  t.teardown(() => runtime.stop());
  return { store, runtime };
}

const indexed = async (store: Store, id: string) => (await store.snapshots.get(`expiring/${id}`))!.deadline;
const context = async (store: Store, id: string) => describeSnapshot((await store.snapshots.get(`expiring/${id}`))!).context as { fired: number; firedAt: number | null };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const allShards = Array.from({ length: SHARDS }, (_, i) => i);

t.test('wakeIndexTime: never after the deadline, the kept entry or the deadline, the deadline once the entry is near', async (t) => {
  const time = fc.option(fc.integer({ min: 0, max: 10_000_000 }), { nil: null });
  fc.assert(
    fc.property(time, time, fc.integer({ min: 0, max: 10_000_000 }), fc.integer({ min: 0, max: 1_000_000 }), (kept, due, now, refresh) => {
      const at = wakeIndexTime(kept, due, now, refresh);
      if (due === null) return at === null;
      if (at === null || at > due || (at !== due && at !== kept)) return false;
      // An entry within the refresh window (or already passed) is moved to the deadline itself.
      return kept === null || kept > now + refresh ? true : at === due;
    }),
    { numRuns: 2000 },
  );
  t.equal(wakeIndexTime(1_000_000, 2_000_000, 0, WAKE_INDEX_REFRESH_MS), 1_000_000, 'a later deadline keeps the entry');
  t.equal(wakeIndexTime(1_000_000, 500_000, 0, WAKE_INDEX_REFRESH_MS), 500_000, 'an earlier one moves it');
  t.equal(wakeIndexTime(1_000_000, null, 0, WAKE_INDEX_REFRESH_MS), null, 'no deadline: no entry');
  t.equal(wakeIndexTime(50_000, 2_000_000, 0, WAKE_INDEX_REFRESH_MS), 2_000_000, 'an entry about to come due is moved on');
});

t.test('a step that moves the deadline later keeps the index entry; an earlier one moves it; the inspector shows the real deadline', async (t) => {
  const { store, runtime } = await runtimeFor(t, { passivateAfterMs: 60_000 });
  const first = Date.now() + 10 * 60_000;
  await runtime.client.ask('expiring', 'kept', { type: 'ARM', at: first });
  t.equal(await indexed(store, 'kept'), first, 'the first deadline is indexed');
  await runtime.client.ask('expiring', 'kept', { type: 'ARM', at: first + 60_000 });
  t.equal(await indexed(store, 'kept'), first, 'a later one keeps the entry');
  t.same((await store.snapshots.due(allShards, first, 10)).map((d) => d.key), ['expiring/kept'], 'one entry, at the first deadline');
  t.same(describeSnapshot((await store.snapshots.get('expiring/kept'))!).deadlines, [{ id: 'expiry', until: new Date(first + 60_000).toISOString() }]);
  await runtime.client.ask('expiring', 'kept', { type: 'ARM', at: first - 60_000 });
  t.equal(await indexed(store, 'kept'), first - 60_000, 'an earlier one moves the entry');
  t.same((await store.snapshots.due(allShards, first + 120_000, 10)).map((d) => d.key), ['expiring/kept'], 'still one entry');
});

for (const asleep of [true, false]) {
  t.test(`an entry that comes due before the deadline moves to it once (${asleep ? 'passivated' : 'live'} actor), and the deadline fires on time`, async (t) => {
    const { store, runtime } = await runtimeFor(t, { passivateAfterMs: 60_000, wakeIndexRefreshMs: 100 });
    const id = asleep ? 'asleep' : 'live';
    const early = Date.now() + 800;
    const real = early + 1500;
    await runtime.client.ask('expiring', id, { type: 'ARM', at: early });
    await runtime.client.ask('expiring', id, { type: 'ARM', at: real });
    t.equal(await indexed(store, id), early, 'the entry is kept at the earlier time');
    const armed = (await store.journal.ofActor(`expiring/${id}`)).length;
    if (asleep) t.equal(await runtime.host!.passivateIdle(), 1, 'passivated');
    t.ok(await eventually(async () => (await indexed(store, id)) === real, real - 300 - Date.now(), 'the entry at the real deadline', 20), 'moved to the real deadline after the entry came due');
    t.ok(Date.now() < real, 'before the deadline');
    t.equal((await context(store, id)).fired, 0, 'nothing fired early');
    const entries = (await store.journal.ofActor(`expiring/${id}`)).length;
    t.equal(entries, armed + 1, 'in one step');
    await sleep(Math.max(0, real - 300 - Date.now()));
    t.equal((await store.journal.ofActor(`expiring/${id}`)).length, entries, 'moved once: no step between the move and the deadline');
    const fired = await eventually(async () => {
      const c = await context(store, id);
      return c.fired === 1 ? c : undefined;
    }, 5000);
    t.ok(fired, 'the deadline fired');
    t.ok(fired!.firedAt! >= real, 'at the deadline, not before');
    t.equal(await indexed(store, id), null, 'no entry once nothing is pending');
  });
}

t.test("the scheduler's wake-ups do not keep an actor live: one whose deadline stays due is still passivated", async (t) => {
  const { runtime } = await runtimeFor(t, { passivateAfterMs: 300 });
  await runtime.client.ask('stubborn', 's', { type: 'ARM', at: Date.now() - 1000 });
  const end = Date.now() + 3000;
  let passivated = false;
  while (!passivated && Date.now() < end) {
    passivated = runtime.host!.liveActors === 0;
    await sleep(10);
  }
  t.ok(passivated, 'passivated between the wake-ups of its due entry');
});

t.test('a busy actor whose entry is due holds one queued wake-up, however many scans find it', async (t) => {
  const { store, runtime } = await runtimeFor(t, { passivateAfterMs: 60_000, wakeIndexRefreshMs: 100 });
  // The entry comes due after the scheduler's own scans look (a tick, 1 s, ahead): only the scans below find it,
  // all while the actor works.
  const early = Date.now() + 5000;
  await runtime.client.ask('slow', 'x', { type: 'ARM', at: early });
  await runtime.client.ask('slow', 'x', { type: 'ARM', at: early + 60_000 });
  const working = runtime.client.ask('slow', 'x', { type: 'WORK' });
  // White-box: three scans that look 10 s ahead, then the activation's mailbox, while its step waits for the work.
  const host = runtime.host as any;
  const activation = await eventually(async () => host.activations.get('slow/x')?.running || null, 1000, 'the work begun', 5);
  t.ok(activation, 'the work begun');
  for (let i = 0; i < 3; i++) await host.wakeDue(10_000);
  const queued = host.activations.get('slow/x').queue ?? [];
  t.equal(queued.filter((j: { type: string }) => j.type === 'wake').length, 1, 'one wake-up queued');
  await working;
  t.ok(await eventually(async () => (await store.snapshots.get('slow/x'))!.deadline === early + 60_000, 2000, 'the entry at the real deadline', 20), 'then the entry moves to the real deadline');
});

t.test('an actor is not passivated while its effect runs: work no ask waits for, longer than the passivation delay, ends once', async (t) => {
  const { store, runtime } = await runtimeFor(t, { passivateAfterMs: 100 });
  resumingRuns = 0;
  await runtime.client.ask('resuming', 'x', { type: 'WORK' });
  // Passivated mid-work, its outcome had no actor to go to; the entry that resumes it woke it to run again, and
  // passivated it again, for ever.
  t.ok(await eventually(async () => (describeSnapshot((await store.snapshots.get('resuming/x'))!).value === 'idle' ? true : null), 3000, 'the work done', 20), 'the work done');
  t.equal(resumingRuns, 1, 'run once');
  t.equal((await store.snapshots.get('resuming/x'))!.deadline, null, 'and no wake-up entry left');
});

t.test("long work that resumes at once does not hold back the timers behind it: the scans move each one's entry on", async (t) => {
  // Two entries a scan; three actors whose work outlasts their resume entry (due 5 s after it began).
  const { store, runtime } = await runtimeFor(t, { passivateAfterMs: 60_000, wakeScanLimit: 2 });
  held = new Promise<void>((r) => (release = r));
  t.teardown(() => release());
  for (const id of ['a', 'b', 'c']) await runtime.client.ask('holding', id, { type: 'WORK' });
  const resumeAt = (await store.snapshots.get('holding/c'))!.deadline!;
  // A passivated actor whose deadline comes after theirs: only the scans can wake it.
  await runtime.client.ask('expiring', 'behind', { type: 'ARM', at: resumeAt + 500 });
  t.equal(await runtime.host!.passivateIdle(), 1, 'the timer actor passivated (not the ones at work)');
  const fired = await eventually(async () => ((await context(store, 'behind')).fired === 1 ? true : null), 15_000, 'the timer behind the long work fired', 50);
  t.ok(fired, 'the deadline fired while the work still ran');
  for (const id of ['a', 'b', 'c']) {
    const entry = (await store.snapshots.get(`holding/${id}`))!;
    t.equal(describeSnapshot(entry).value, 'working', `${id} still at work`);
    t.ok(entry.deadline! > resumeAt, `${id}'s resume entry moved on`);
  }
  release();
  for (const id of ['a', 'b', 'c']) {
    t.ok(await eventually(async () => ((await store.snapshots.get(`holding/${id}`))!.deadline === null ? true : null), 5000, `${id} done`, 20), `${id}'s work done, no entry left`);
  }
});
