import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeSnapshot, startRuntime, type Runtime } from '../actors/mod.js';
import { openStore, type Store } from '../store/mod.js';
import { actorBehaviour, type Cluster } from './actors.behaviour.js';
import { removeDir } from './helpers/platform.js';

const PASSIVATE_MS = 300;
let store: Store;
let runtime: Runtime;
let dir: string;

t.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sb-actors-'));
  store = await openStore({ dataDir: dir });
  runtime = await startRuntime({ store, worker: true, shardCount: 16, leaseTtlMs: 3000, passivateAfterMs: PASSIVATE_MS, askTimeoutMs: 5000 });
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
