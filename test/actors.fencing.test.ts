import t from 'tap';
import { waitForProjections } from './helpers/projections.js';
import { natsAvailable } from './helpers/nats.js';
import { eventually } from './helpers/eventually.js';
import { startCluster } from './helpers/cluster.js';
import { openStore } from '../store/mod.js';

// Without nats-server these skip locally; with CI=true natsAvailable() throws, so they fail instead.
const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

type Counter = { count: number };

t.test('a stalled worker (SIGSTOP past its lease) cannot overwrite the new owner', needsNats, async (t) => {
  const cluster = await startCluster({ workers: 2, leaseTtlMs: 1500, passivateAfterMs: 60_000 });
  t.teardown(() => cluster.stop());
  const id = 'fenced-counter';
  const seen: number[] = [];
  const inc = async () => seen.push((await cluster.client.ask<Counter>('counter', id, { type: 'INC' }, { timeoutMs: 60_000 })).count);
  for (let i = 0; i < 5; i++) await inc();
  const owner = (await cluster.ownerOf('counter', id))!;
  const fenceBefore = (await cluster.describe('counter', id)).fence;
  // The stall must not land inside one of the worker's LMDB write transactions (its projection runner writes
  // right after each step): on one host the processes share LMDB's single writer lock, and a process stopped
  // while holding it stops every writer until it resumes (docs/runtime.md, "Stalls and the embedded store").
  // What this test holds is the fencing once the stalled worker is idle.
  await waitForProjections(cluster.edge as { edge: string; operatorToken: string });

  owner.child.kill('SIGSTOP');
  // these are served by the other worker once the stalled one's lease expires
  for (let i = 0; i < 5; i++) await inc();
  const during = await cluster.describe('counter', id);
  t.ok(during.fence > fenceBefore, `the new owner writes with a larger fence (${fenceBefore} → ${during.fence})`);

  owner.child.kill('SIGCONT');
  // the stalled worker wakes up still subscribed and holding the actor in memory with count 5
  for (let i = 0; i < 10; i++) await inc();
  t.same(seen, Array.from({ length: 20 }, (_, i) => i + 1), 'the counter never skipped or repeated');
  const after = await cluster.describe('counter', id);
  t.equal(after.context.count, 20, 'the stored state is the newest');
  t.equal(after.version, 20, 'one write per event, none overwritten');
  // The stalled worker's refused writes appended nothing: the journal has exactly one entry per version.
  const store = await openStore({ dataDir: cluster.dataDir });
  const entries = await store.journal.ofActor(`counter/${id}`);
  await store.close();
  t.same(entries.map((e) => e.version), Array.from({ length: 20 }, (_, i) => i + 1), 'one journal entry per snapshot version');
  t.same(entries.map((e) => e.events[0]?.data.count), Array.from({ length: 20 }, (_, i) => i + 1), 'each with the event its step emitted');

  const settled = await eventually(async () => {
    const r = await cluster.runtime();
    const all = r.workers.flatMap((w: any) => w.shards);
    return r.unownedShards.length === 0 && r.workers.length === 2 && new Set(all).size === all.length ? r : null;
  });
  t.ok(settled, 'both workers own shards again, each shard exactly once');
});
