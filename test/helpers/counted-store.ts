import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openStore, type Store } from '../../store/mod.js';

/**
 * A real embedded store in a fresh directory, its journal's `ofActor` reads counted as they pass (the entries
 * returned): for tests of how much a reader reads, which no client can see.
 */
export async function countedStore(prefix: string): Promise<{ store: Store; read: () => number; close: () => Promise<void> }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const store = await openStore({ dataDir: dir });
  let entries = 0;
  const ofActor = store.journal.ofActor.bind(store.journal);
  store.journal.ofActor = async (key, opts) => {
    const got = await ofActor(key, opts);
    entries += got.length;
    return got;
  };
  const close = async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  return { store, read: () => entries, close };
}
