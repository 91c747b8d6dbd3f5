import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type Store } from '../../store/mod.js';
import { removeDir } from './platform.js';

/** An embedded store in a fresh temporary directory, closed and removed when `t` ends. */
export async function storeFor(t: { teardown(fn: () => unknown): void }, prefix = 'sb-store-'): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const store = await openStore({ dataDir: dir });
  t.teardown(async () => {
    await store.close();
    removeDir(dir);
  });
  return store;
}
