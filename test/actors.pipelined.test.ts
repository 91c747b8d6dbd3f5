import t from 'tap';
import type { PersistedActor } from '../actors/protocol.js';
import type { CounterContext } from '../machines/counter.js';
import { heldRuntime, settlesSoon } from './helpers/held-commits.js';

/**
 * The pipelined mailbox (`actors/activation.ts`): on a store durable in queue order, an actor runs its next event
 * once a step's commit is queued; replies, retries' answers and the store's versions still follow durability.
 */

/** Waits (a few turns at most) until `n` writes of `key` have reached the store. */
async function writesReach(written: string[], key: string, n: number): Promise<boolean> {
  for (let i = 0; i < 50; i++) {
    if (written.filter((k) => k === key).length >= n) return true;
    await new Promise((r) => setTimeout(r, 2));
  }
  return false;
}

t.test('the next event runs while the step before it is being committed; both answer once durable', async (t) => {
  const { store, held, runtime } = await heldRuntime(t);
  held.hold();
  const first = runtime.client.ask<{ count: number }>('counter', 'pipe', { type: 'INC' });
  const second = runtime.client.ask<{ count: number }>('counter', 'pipe', { type: 'INC' });
  t.ok(await writesReach(held.written, 'counter/pipe', 2), 'the second write is queued before the first is durable');
  t.notOk(await settlesSoon(Promise.race([first, second])), 'neither is answered before it is durable');
  held.release();
  t.same([(await first).count, (await second).count], [1, 2]);
  const stored = await store.snapshots.get('counter/pipe');
  t.equal(stored?.version, 2);
  t.same((await store.journal.ofActor('counter/pipe')).map((e) => e.version), [1, 2], 'one journal entry per step, in order');
});

t.test('a store whose commits may complete out of order gets one write of an actor at a time', async (t) => {
  const { held, runtime } = await heldRuntime(t, false);
  held.hold();
  const first = runtime.client.ask('counter', 'one-at-a-time', { type: 'INC' });
  const second = runtime.client.ask('counter', 'one-at-a-time', { type: 'INC' });
  t.ok(await writesReach(held.written, 'counter/one-at-a-time', 1));
  t.notOk(await writesReach(held.written, 'counter/one-at-a-time', 2), 'the second write waits for the first');
  held.release();
  await Promise.all([first, second]);
});

t.test('a retried event is answered only once the step it repeats is durable', async (t) => {
  const { held, runtime } = await heldRuntime(t);
  held.hold();
  const asked = runtime.client.ask<{ count: number }>('counter', 'retried', { type: 'INC' }, { eventId: 'retried-1' });
  t.ok(await writesReach(held.written, 'counter/retried', 1));
  const retry = runtime.client.ask<{ count: number }>('counter', 'retried', { type: 'INC' }, { eventId: 'retried-1' });
  t.notOk(await settlesSoon(retry), 'the retry waits for the commit');
  held.release();
  t.same([(await asked).count, (await retry).count], [1, 1], 'applied once, the same answer twice');
});

t.test('a retry of an earlier event whose step is still being committed is answered from the journal once durable', async (t) => {
  const { held, runtime } = await heldRuntime(t);
  held.hold();
  const first = runtime.client.ask<{ count: number }>('counter', 'older', { type: 'INC' }, { eventId: 'older-1' });
  const second = runtime.client.ask<{ count: number }>('counter', 'older', { type: 'INC' }, { eventId: 'older-2' });
  t.ok(await writesReach(held.written, 'counter/older', 2));
  // Not the latest event: its answer is not held in memory, and its journal entry is not durable yet.
  const retry = runtime.client.ask<{ count: number }>('counter', 'older', { type: 'INC' }, { eventId: 'older-1' });
  t.notOk(await settlesSoon(retry), 'the retry waits for the commits queued before it');
  held.release();
  t.same([(await first).count, (await second).count, (await retry).count], [1, 2, 1], 'the first answer, applied once');
  t.equal((await runtime.client.ask<{ count: number }>('counter', 'older', { type: 'INC' })).count, 3);
});

t.test('writes queued behind one that another writer beat are refused, and the events apply on that writer\'s state', async (t) => {
  const { store, held, runtime } = await heldRuntime(t);
  const key = 'counter/overtaken';
  t.equal((await runtime.client.ask<{ count: number }>('counter', 'overtaken', { type: 'INC' })).count, 1);
  // Another writer (a second activation under the same lease) stores the next version, with a count of 100.
  const stored = (await store.snapshots.get(key))!;
  const data = stored.data as PersistedActor;
  (data.s as { context: CounterContext }).context.count = 100;
  const other = await store.snapshots.putMany([{ key, data, expectedVersion: stored.version, fence: stored.fence, shard: stored.shard, deadline: null, step: { value: 'idle', events: [] } }]);
  t.match(other, [{ ok: true, version: 2 }]);
  // The live activation still stands on version 1: three events, their writes queued one behind another.
  held.hold();
  const asks = [1, 2, 3].map(() => runtime.client.ask<{ count: number }>('counter', 'overtaken', { type: 'INC' }));
  t.ok(await writesReach(held.written, key, 1 + 3), 'three writes queued');
  held.release();
  const counts = (await Promise.all(asks)).map((r) => r.count).sort((a, b) => a - b);
  t.same(counts, [101, 102, 103], 'every event applied once, on top of the other writer\'s state (the client retried)');
  t.equal((await store.snapshots.get(key))?.version, 5);
  t.same((await store.journal.ofActor(key)).map((e) => e.version), [1, 2, 3, 4, 5]);
});
