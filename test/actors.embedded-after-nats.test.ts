import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinKinds, startRuntime } from '../actors/mod.js';
import { openStore } from '../store/mod.js';
import { natsAvailable, startNats } from './helpers/nats.js';
import { removeDir } from './helpers/platform.js';

// Without nats-server this skips locally; with CI=true natsAvailable() throws, so it fails instead.
const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

type Counter = { count: number };

t.test('a data directory written over NATS is taken up embedded: the embedded worker writes with the store\'s highest fence', needsNats, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-embedded-after-nats-'));
  const store = await openStore({ dataDir });
  const nats = await startNats();
  t.teardown(async () => {
    await nats.stop();
    await store.close();
    removeDir(dataDir);
  });
  const options = { store, worker: true, shardCount: 8, leaseTtlMs: 3_000, passivateAfterMs: 60_000, askTimeoutMs: 5_000, kinds: builtinKinds() } as const;

  const overNats = await startRuntime(Object.assign({}, options, { natsUrl: nats.url }));
  for (let i = 1; i <= 3; i++) t.equal((await overNats.client.ask<Counter>('counter', 'c', { type: 'INC' }, { timeoutMs: 30_000 })).count, i);
  await overNats.stop();
  const leased = (await store.snapshots.get('counter/c'))!;
  t.ok(leased.fence > 1, `over NATS the fence is the lease's revision (${leased.fence})`);
  t.equal(await store.snapshots.highestFence(), leased.fence);

  const embedded = await startRuntime(options);
  t.teardown(() => embedded.stop());
  t.equal((await embedded.client.ask<Counter>('counter', 'c', { type: 'INC' })).count, 4, 'the counter goes on where NATS left it');
  t.equal((await embedded.client.ask<Counter>('counter', 'fresh', { type: 'INC' })).count, 1, 'and a new actor starts');
  const after = (await store.snapshots.get('counter/c'))!;
  t.equal(after.version, 4, 'its write was taken, not refused as stale');
  t.equal(after.fence, leased.fence, 'with the highest fence the store held');
});
