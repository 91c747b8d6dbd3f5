/**
 * The runtime's cheaper building blocks of a turn: `fromTask` promise actors (no AbortController), the
 * `sleepUntil` timer built on it, snapshot encoding with msgpack records, and the commit queue's hand-over
 * to the store within the same event-loop turn.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { assign, createActor, fromPromise, setup, type AnyActorLogic } from 'xstate';
import { CommitQueue } from '../actors/commit.js';
import { decode, encode } from '../actors/protocol.js';
import { fromEffect, fromTask } from '../actors/task.js';
import { pendingDeadlines, sleepUntil } from '../actors/timers.js';
import { openLmdbStore } from '../store/lmdb/store.js';

/** Waits, then invokes `work` with the input it was sent, and again waits with a durable timer. */
function machine(work: AnyActorLogic, sleep: AnyActorLogic) {
  return setup({
    types: {} as { context: { result: unknown; error: unknown }; events: { type: 'GO'; n: number } | { type: 'NAP'; until: number } | { type: 'WAKE' } },
    actors: { work, sleepUntil: sleep },
  }).createMachine({
    context: { result: null, error: null },
    initial: 'idle',
    states: {
      idle: { on: { GO: 'working', NAP: 'napping' } },
      working: {
        invoke: {
          src: 'work',
          input: ({ event }: { event: unknown }) => (event as { n: number }).n,
          onDone: { target: 'idle', actions: assign({ result: ({ event }: { event: { output: unknown } }) => event.output }) },
          onError: { target: 'idle', actions: assign({ error: ({ event }: { event: { error: unknown } }) => String(event.error) }) },
        },
      },
      napping: {
        invoke: { id: 'nap', src: 'sleepUntil', input: ({ event }: { event: unknown }) => ({ until: (event as { until: number }).until }), onDone: 'woke' },
        on: { WAKE: 'idle' },
      },
      woke: {},
    },
  });
}

const until = (actor: { getSnapshot: () => any; subscribe: (f: (s: any) => void) => { unsubscribe: () => void } }, value: string) =>
  new Promise<any>((resolve) => {
    if (actor.getSnapshot().value === value) return resolve(actor.getSnapshot());
    const sub = actor.subscribe((s) => {
      if (s.value === value) {
        sub.unsubscribe();
        resolve(s);
      }
    });
  });

t.test('fromEffect: the output or the error of the promise reaches the machine', async (t) => {
  const double = fromEffect(async (n: number) => {
    if (n < 0) throw new Error('negative');
    return n * 2;
  });
  const actor = createActor(machine(double, sleepUntil)).start();
  actor.send({ type: 'GO', n: 21 });
  t.equal((await until(actor, 'idle')).context.result, 42);
  actor.send({ type: 'GO', n: -1 });
  await new Promise((r) => setImmediate(r));
  t.match(actor.getSnapshot().context.error, /negative/);
  actor.stop();
});

t.test('fromTask: a task stopped before it settles is cancelled and its late result ignored', async (t) => {
  let cancelled = 0;
  let finish: (v: number) => void = () => undefined;
  const slow = fromTask((n: number) => ({ done: new Promise<number>((r) => (finish = () => r(n))), cancel: () => cancelled++ }));
  const actor = createActor(
    setup({ actors: { slow } }).createMachine({
      initial: 'a',
      states: { a: { invoke: { src: 'slow', input: 1, onDone: 'done' }, on: { LEAVE: 'b' } }, b: {}, done: {} },
    }),
  ).start();
  actor.send({ type: 'LEAVE' });
  t.equal(cancelled, 1, 'leaving the state cancels the task');
  finish(1);
  await new Promise((r) => setImmediate(r));
  t.equal(actor.getSnapshot().value, 'b', 'its result arrives to nobody');
  actor.stop();
});

t.test('sleepUntil: fires at its deadline; a stopped one never fires', async (t) => {
  const actor = createActor(machine(fromEffect(async () => 0), sleepUntil)).start();
  const started = Date.now();
  actor.send({ type: 'NAP', until: started + 30 });
  await until(actor, 'woke');
  t.ok(Date.now() >= started + 30, 'not before the deadline');
  actor.stop();

  const other = createActor(machine(fromEffect(async () => 0), sleepUntil)).start();
  other.send({ type: 'NAP', until: Date.now() + 20 });
  other.send({ type: 'WAKE' });
  await new Promise((r) => setTimeout(r, 60));
  t.equal(other.getSnapshot().value, 'idle', 'left before the deadline: the timer is gone');
  other.stop();
});

t.test("sleepUntil: snapshots persisted with XState's fromPromise timer restore and fire", async (t) => {
  // The timer as it was before fromTask: same snapshot shape and events, so stored actors keep working.
  const legacy = fromPromise<number, { until: number }>(
    ({ input, signal }) =>
      new Promise((resolve) => {
        const timer = setTimeout(() => resolve(Date.now()), Math.max(0, input.until - Date.now()));
        signal.addEventListener('abort', () => clearTimeout(timer));
      }),
  );
  const old = createActor(machine(fromEffect(async () => 0), legacy)).start();
  const deadline = Date.now() + 40;
  old.send({ type: 'NAP', until: deadline });
  const persisted = decode(encode(old.getPersistedSnapshot()));
  old.stop();
  t.same(pendingDeadlines(persisted), [{ id: 'nap', until: deadline }], 'the deadline is in the stored snapshot');
  const restored = createActor(machine(fromEffect(async () => 0), sleepUntil), { snapshot: persisted as never }).start();
  t.equal(restored.getSnapshot().value, 'napping');
  await until(restored, 'woke');
  t.ok(Date.now() >= deadline, 'the restored timer fires at the stored deadline');
  restored.stop();
});

t.test('commit queue: a write reaches the store within the event-loop turn it was made in', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchboard-commit-'));
  const store = await openLmdbStore({ dataDir: dir });
  t.teardown(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const handed: number[] = [];
  const putMany = store.snapshots.putMany.bind(store.snapshots);
  const snapshots = { ...store.snapshots, get: store.snapshots.get.bind(store.snapshots), putMany: (w: Parameters<typeof putMany>[0]) => (handed.push(w.length), putMany(w)) };
  const queue = new CommitQueue(snapshots as typeof store.snapshots);
  const write = (key: string) => queue.put({ key, data: new Uint8Array([1]), expectedVersion: 0, fence: 1, shard: 0, deadline: null });
  // A record projected just before (as an activation does) has scheduled the store's flush already: the
  // snapshot shares that commit only if it is handed over before any callback scheduled earlier runs.
  const seenByEarlierCallback = new Promise<number[]>((r) => setImmediate(() => r([...handed])));
  const done = Promise.all([write('a/1'), write('a/2')]);
  t.same(await seenByEarlierCallback, [2], 'both writes handed over together, within the turn');
  t.same((await done).map((r) => r.ok), [true, true]);
  t.equal((await store.snapshots.get('a/2'))?.version, 1);
});
