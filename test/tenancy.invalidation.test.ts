/**
 * The invalidation bus refreshes the store's read snapshot before it drops the cache entries: the reloads
 * that follow read the write that caused the invalidation (`test/store.lmdb.threads.test.ts` shows what a
 * thread's older snapshot would still hold).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { encode } from '../actors/mod.js';
import { createInprocTransport } from '../actors/transport/mod.js';
import { INVALIDATE_SUBJECT, startInvalidationBus } from '../platform/invalidation.js';
import { openStore, type Store } from '../store/mod.js';
import { TenancyCache } from '../tenancy/cache.js';
import { eventually } from './helpers/eventually.js';
import { removeDir } from './helpers/platform.js';

t.test('an invalidation from another holder refreshes the store, then drops the entry', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-invalidation-'));
  const real = await openStore({ dataDir });
  const order: string[] = [];
  // The real store, with its refresh recorded.
  const store: Store = Object.assign(Object.create(real) as Store, {
    refresh: () => {
      order.push('refresh');
      real.refresh();
    },
  });
  const cache = new TenancyCache({ ttlMs: 60_000, maxEntries: 100 });
  const transport = createInprocTransport();
  const bus = await startInvalidationBus({ transport, store, cache, beatTtlMs: 3000, log: () => undefined });
  t.teardown(async () => {
    await bus.stop();
    await transport.close();
    await real.close();
    removeDir(dataDir);
  });
  await cache.connectors.read('con_1', async () => ({ id: 'con_1' }) as never);
  const invalidate = cache.connectors.invalidate.bind(cache.connectors);
  cache.connectors.invalidate = (key?: string) => {
    order.push('invalidate');
    invalidate(key);
  };
  transport.publish(INVALIDATE_SUBJECT, encode({ kind: 'connector', id: 'con_1' }));
  await eventually(async () => cache.connectors.get('con_1') === undefined, 5000, 'the entry to be dropped');
  t.same(order, ['refresh', 'invalidate'], 'the snapshot is refreshed first');
});
