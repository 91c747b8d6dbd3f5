import t, { type Test } from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { builtinKinds, startRuntime, type Runtime } from '../actors/mod.js';
import { openStore, type Store } from '../store/mod.js';
import { natsAvailable, startNats } from './helpers/nats.js';
import { removeDir } from './helpers/platform.js';

// Without nats-server this skips locally; with CI=true natsAvailable() throws, so it fails instead.
const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

type Counter = { count: number };

const options = { worker: true, shardCount: 8, leaseTtlMs: 1_500, passivateAfterMs: 60_000, askTimeoutMs: 5_000, kinds: builtinKinds() } as const;

/**
 * Makes a JetStream store look like a deployment's that ran for a while: its lease revisions far past a fresh
 * store's first ones (256 shards renewed every second pass 20,000 in under two minutes).
 */
async function ranForAWhile(url: string): Promise<void> {
  const nc = await connect({ servers: url });
  try {
    const shards = await new Kvm(jetstream(nc)).create('sb_shards', { ttl: options.leaseTtlMs, history: 1, replicas: 1 });
    // In batches: 20,000 publishes in flight at once outlast their acknowledgements' timeout on a loaded machine.
    for (let done = 0; done < 20_000; done += 500) await Promise.all(Array.from({ length: 500 }, () => shards.put('earlier', '')));
  } finally {
    await nc.close();
  }
}

/** A store in a fresh data directory, closed and removed after the test. */
async function tempStore(t: Test): Promise<Store> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-fresh-js-'));
  const store = await openStore({ dataDir });
  t.teardown(async () => {
    await store.close();
    removeDir(dataDir);
  });
  return store;
}

/**
 * Increments counter `c` once, asking again (with the same event id, so it applies once) until an answer comes
 * while the worker takes its shards back.
 */
async function incrementOnceAnswered(runtime: Runtime): Promise<number> {
  const deadline = Date.now() + 30_000;
  const eventId = `after-restart-${Date.now()}`;
  for (;;) {
    try {
      return (await runtime.client.ask<Counter>('counter', 'c', { type: 'INC' }, { timeoutMs: 2_000, eventId })).count;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

t.test('a deployment restarted on a fresh JetStream store goes on where its data directory is', needsNats, async (t) => {
  const store = await tempStore(t);
  const first = await startNats();
  await ranForAWhile(first.url);
  const before = await startRuntime(Object.assign({ store, natsUrl: first.url }, options));
  for (let i = 1; i <= 4; i++) t.equal((await before.client.ask<Counter>('counter', 'c', { type: 'INC' }, { timeoutMs: 30_000 })).count, i);
  await before.stop();
  await first.stop();
  const stored = (await store.snapshots.get('counter/c'))!;
  t.ok(stored.fence > 20_000, `the stored fence is a late revision (${stored.fence})`);

  // The NATS host rebooted with its JetStream store in a temporary directory: the leases are gone.
  const fresh = await startNats();
  t.teardown(() => fresh.stop());
  const after = await startRuntime(Object.assign({ store, natsUrl: fresh.url }, options));
  t.teardown(() => after.stop());
  t.equal((await after.client.ask<Counter>('counter', 'c', { type: 'INC' }, { timeoutMs: 10_000 })).count, 5, 'the counter goes on');
  const written = (await store.snapshots.get('counter/c'))!;
  t.equal(written.version, stored.version + 1, 'its write was taken, not refused as stale');
  t.ok(written.fence > stored.fence, `with a fence above every stored one (${written.fence} > ${stored.fence})`);
});

t.test('a running deployment survives its NATS server restarting on a fresh JetStream store', needsNats, async (t) => {
  const store = await tempStore(t);
  const first = await startNats();
  await ranForAWhile(first.url);
  const lines: string[] = [];
  const runtime = await startRuntime(Object.assign({ store, natsUrl: first.url, log: (msg: string) => void lines.push(msg) }, options));
  for (let i = 1; i <= 3; i++) t.equal((await runtime.client.ask<Counter>('counter', 'c', { type: 'INC' }, { timeoutMs: 30_000 })).count, i);
  const stored = (await store.snapshots.get('counter/c'))!;
  await first.kill();
  const fresh = await startNats({ port: first.port });
  // Teardowns run last added first: the runtime stops while its server still runs.
  t.teardown(() => fresh.stop());
  t.teardown(() => runtime.stop());
  const count = await incrementOnceAnswered(runtime);
  t.equal(count, 4, 'the counter goes on after the restart');
  const written = (await store.snapshots.get('counter/c'))!;
  t.ok(written.fence > stored.fence, `with a fence above every stored one (${written.fence} > ${stored.fence})`);
  t.ok(lines.includes('placement: lease store replaced, buckets opened again'), 'the worker said why it dropped its shards');
});

t.test('a NATS server restarted on its own store keeps the lease store: no worker drops its shards for it', needsNats, async (t) => {
  const store = await tempStore(t);
  const first = await startNats();
  const lines: string[] = [];
  const runtime = await startRuntime(Object.assign({ store, natsUrl: first.url, log: (msg: string) => void lines.push(msg) }, options));
  t.equal((await runtime.client.ask<Counter>('counter', 'c', { type: 'INC' }, { timeoutMs: 30_000 })).count, 1);
  await first.stop();
  const again = await startNats({ port: first.port, storeDir: first.storeDir });
  t.teardown(() => again.stop());
  t.teardown(() => runtime.stop());
  const count = await incrementOnceAnswered(runtime);
  t.equal(count, 2, 'the counter goes on');
  // A few rounds with the server back, each comparing the buckets' streams with the ones opened.
  await new Promise((r) => setTimeout(r, options.leaseTtlMs));
  t.notOk(lines.some((l) => l.includes('lease store replaced')), 'the buckets are the ones opened before the restart');
});
