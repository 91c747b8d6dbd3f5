import t from 'tap';
import type { Runtime } from '../actors/mod.js';
import { encode, shardSubject } from '../actors/protocol.js';
import { shardOf } from '../actors/placement/shard.js';
import type { Store } from '../store/mod.js';
import { heldRuntime, settlesSoon, SHARDS, type HeldCommits } from './helpers/held-commits.js';

let store: Store;
let held: HeldCommits;
let runtime: Runtime;
t.before(async () => {
  ({ store, held, runtime } = await heldRuntime(t));
});

t.test('an ordered ask from this thread is answered once its commit is queued, before it is durable', async (t) => {
  await runtime.client.ask('counter', 'ordered', { type: 'INC' });
  held.hold();
  t.teardown(() => held.release());
  const ordered = runtime.client.ask<{ count: number }>('counter', 'ordered', { type: 'INC' }, { ordered: true });
  t.ok(await settlesSoon(ordered), 'answered while the commit is held');
  t.equal((await ordered).count, 2, 'with the step it queued');
  const plain = runtime.client.ask('counter', 'plain', { type: 'INC' });
  t.notOk(await settlesSoon(plain), 'an ask that is not ordered waits for durability');
  held.release();
  await plain;
  t.equal((await store.snapshots.get('counter/ordered'))?.version, 2, 'the ordered step is durable');
});

t.test('an ordered ask that comes as bytes (another thread or process) waits for durability', async (t) => {
  await runtime.client.ask('counter', 'from-afar', { type: 'INC' });
  held.hold();
  t.teardown(() => held.release());
  const shard = shardOf('counter/from-afar', SHARDS);
  const envelope = { kind: 'counter', id: 'from-afar', event: { type: 'INC' }, eventId: 'afar-1', ordered: true };
  const asked = runtime.transport.request(shardSubject(shard), encode(envelope), 5000);
  t.notOk(await settlesSoon(asked), 'not answered while the commit is held');
  held.release();
  t.match(await asked, Uint8Array);
});

t.test('an ordered ask is not answered early when the store may make commits durable out of order', async (t) => {
  const { held: other, runtime: rt } = await heldRuntime(t, false);
  await rt.client.ask('counter', 'mongo-like', { type: 'INC' });
  other.hold();
  const ordered = rt.client.ask('counter', 'mongo-like', { type: 'INC' }, { ordered: true });
  t.notOk(await settlesSoon(ordered), 'waits for durability');
  other.release();
  await ordered;
});

t.test('the step after an ordered ask is queued behind it: the asked step is durable first', async (t) => {
  // Unheld: the asker's own step, queued on the answer, lands in the same group commit or a later one.
  const before = await store.journal.head();
  await Promise.all(
    Array.from({ length: 50 }, async (_, i) => {
      await runtime.client.ask('counter', `asked-${i}`, { type: 'INC' }, { ordered: true });
      await runtime.client.ask('counter', `asker-${i}`, { type: 'INC' });
    }),
  );
  const entries = await store.journal.read(before, 1000);
  const seqOf = new Map(entries.map((e) => [e.key, e.seq]));
  const late = Array.from({ length: 50 }, (_, i) => i).filter((i) => !(seqOf.get(`counter/asked-${i}`)! < seqOf.get(`counter/asker-${i}`)!));
  t.same(late, [], 'every asked step has the lower seq');
});
