/**
 * The projection runner over NATS: each worker process applies the partitions of the shards it holds, so
 * two workers split the journal, every entry applied once, by its partition's owner.
 */
import t from 'tap';
import { join } from 'node:path';
import { openStore } from '../store/mod.js';
import { partitionOf } from '../actors/mod.js';
import { natsAvailable } from './helpers/nats.js';
import { startCluster, type NatsCluster } from './helpers/cluster.js';
import { http } from './helpers/http.js';
import { DIST } from './helpers/platform.js';
import { appliedOf, countsOf } from './helpers/projector.js';

const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };
// As many partitions as shards: partition p belongs to the holder of shard p, and a settled cluster gives every
// worker some shard, so every worker owns some partition (with 8 partitions over 16 shards, a worker holding
// only shards 8 to 15 owned none, and the test failed on placement alone).
const SHARDS = 16;
const PARTITIONS = SHARDS;

let cluster: NatsCluster;
t.before(async () => {
  if (needsNats.skip) return;
  cluster = await startCluster({
    workers: 2,
    shardCount: SHARDS,
    env: { PROJECTION_MODULES: join(DIST, 'test', 'helpers', 'projector.js'), PROJECTION_PARTITIONS: String(PARTITIONS), PROJECTION_POLL_MS: '100' },
  });
});
t.teardown(async () => cluster?.stop());

t.test('two worker processes split the partitions; each entry is applied once, by its owner', needsNats, async (t) => {
  const info = await cluster.runtime();
  const ownerOfShard = new Map<number, string>();
  for (const w of info.workers) for (const s of w.shards) ownerOfShard.set(s, w.id);
  const pidOf = new Map(cluster.workers.map((w) => [w.worker, w.child.pid]));
  const ids = Array.from({ length: 60 }, (_, i) => `p-${i}`);
  await Promise.all(ids.map(async (id) => {
    for (let i = 0; i < 5; i++) await cluster.client.ask('counter', id, { type: 'INC' });
  }));
  const token = (cluster.edge as { operatorToken: string }).operatorToken;
  const waited = await http(cluster.edge.edge, 'GET', '/admin/v1/runtime/projections?wait=1&timeout_ms=30000', { headers: { authorization: `Bearer ${token}` } });
  t.match(waited.body, { caughtUp: true, partitions: PARTITIONS });
  t.ok(waited.body.projections.some((x: any) => x.name === 'test-counts'), 'the test projector is listed beside the registry projectors');

  const store = await openStore({ dataDir: cluster.dataDir });
  t.teardown(() => store.close());
  const counts = await countsOf(store).find({ id: { $in: ids.map((id) => `counter/${id}`) } });
  t.equal(counts.length, ids.length);
  t.ok(counts.every((c) => c.version === 5 && c.steps === 5 && c.incremented === 5), 'every actor projected: 5 steps, 5 events');
  const entries = (await store.journal.read(0, 10_000)).filter((e) => e.kind === 'counter' && ids.includes(e.id));
  t.equal(entries.length, ids.length * 5);
  const applied = new Map((await appliedOf(store).find({})).map((a) => [a.id, a]));
  const byPid = new Map<number, number>();
  let wrongOwner = 0;
  let again = 0;
  for (const e of entries) {
    const a = applied.get(String(e.seq));
    if (!a) {
      t.fail(`entry ${e.seq} not applied`);
      continue;
    }
    // Partition p belongs to the worker holding shard p.
    if (a.pid !== pidOf.get(ownerOfShard.get(partitionOf(e, PARTITIONS))!)) wrongOwner++;
    again += a.again;
    byPid.set(a.pid, (byPid.get(a.pid) ?? 0) + 1);
  }
  t.equal(wrongOwner, 0, 'each entry applied by the owner of its partition');
  t.equal(again, 0, 'none applied twice');
  t.equal(byPid.size, 2, `both workers applied entries (${[...byPid.values()].join(' + ')})`);
});
