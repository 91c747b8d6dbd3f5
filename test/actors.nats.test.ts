import t from 'tap';
import { natsAvailable } from './helpers/nats.js';
import { actorBehaviour } from './actors.behaviour.js';
import { startCluster, type NatsCluster } from './helpers/cluster.js';
import { ownerOf } from '../actors/placement/mod.js';

// Without nats-server these skip locally; with CI=true natsAvailable() throws, so they fail instead.
const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

let cluster: NatsCluster;

t.before(async () => {
  if (!needsNats.skip) cluster = await startCluster({ workers: 2, passivateAfterMs: 2000 });
});
t.teardown(async () => cluster?.stop());

/** Every shard is with the worker rendezvous hashing picks among `workers` (`ownerOf`). */
function placed(workers: Array<{ id: string; shards: number[] }>): boolean {
  const ids = workers.map((w) => w.id);
  return Array.from({ length: cluster.shardCount }, (_, s) => s).every((s) => workers.find((w) => w.shards.includes(s))?.id === ownerOf(s, ids, cluster.shardCount));
}

actorBehaviour(t, () => cluster, needsNats);

t.test('introspection lists the workers, their shards and live actors', needsNats, async (t) => {
  const info = await cluster.runtime();
  t.equal(info.workers.length, 2);
  const shards = info.workers.flatMap((w) => w.shards).sort((a, b) => a - b);
  t.same(shards, Array.from({ length: cluster.shardCount }, (_, i) => i), 'every shard owned exactly once');
  // Spread as rendezvous hashing spreads them (not "each has one": with 16 shards one of two workers wins none
  // about once in 33,000 sets of worker ids).
  t.ok(placed(info.workers), 'each shard with the worker rendezvous hashing picks');
  await cluster.client.ask('counter', 'introspected', { type: 'INC' });
  const actor = await cluster.describe('counter', 'introspected');
  t.match(actor, { key: 'counter/introspected', value: 'idle', context: { count: 1 }, version: 1, deadlines: [] });
  t.equal((await cluster.describe('counter', 'never-seen')), null, 'unknown actor: 404');
});

t.test('a worker that joins takes its share, and the actors keep counting', needsNats, async (t) => {
  const ids = Array.from({ length: 30 }, (_, i) => `join-${i}`);
  for (const id of ids) await cluster.client.ask('counter', id, { type: 'INC' });
  await cluster.addWorker();
  // Its share is what rendezvous hashing gives it among the three: every shard with the worker it picks. (Not
  // "at least one shard": with 16 shards a third worker wins none about once in 650 sets of worker ids.)
  let info = await cluster.runtime();
  for (let i = 0; i < 100 && !(info.workers.length === 3 && placed(info.workers) && info.unownedShards.length === 0); i++) {
    await new Promise((r) => setTimeout(r, 200));
    info = await cluster.runtime();
  }
  t.equal(info.workers.length, 3);
  t.ok(placed(info.workers), 'every shard is with the worker rendezvous hashing picks among the three, the new one included');
  t.same(info.unownedShards, [], 'no shard unowned');
  const counts = await Promise.all(ids.map(async (id) => (await cluster.client.ask<{ count: number }>('counter', id, { type: 'INC' })).count));
  t.ok(counts.every((c) => c === 2), 'state moved with the shards');
});
