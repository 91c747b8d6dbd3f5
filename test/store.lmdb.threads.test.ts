/**
 * The embedded store read from two threads of one process, as the platform does (the main thread, the edge
 * thread, the projection thread): a record another thread has just committed is found, even by a thread whose
 * read snapshot began before that commit (lmdb-js keeps one per thread until its next timers phase).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import t from 'tap';
import { openStore } from '../store/mod.js';
import { removeDir } from './helpers/platform.js';

/** The writer thread: opens the same store, waits for `go`, inserts `fresh`, then says `done`. */
const WRITER = `
const { workerData, parentPort } = require('node:worker_threads');
(async () => {
  const { openStore } = await import(workerData.storeModule);
  const store = await openStore({ dataDir: workerData.dataDir });
  const things = store.collection({ name: 'things' });
  const flags = new Int32Array(workerData.flags);
  parentPort.postMessage('ready');
  Atomics.wait(flags, 0, 0);
  await things.insert({ id: 'fresh', n: 1 });
  Atomics.store(flags, 1, 1);
  Atomics.notify(flags, 1);
})();
`;

t.test('a record committed by another thread after this thread began its read snapshot is found', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-threads-'));
  const store = await openStore({ dataDir });
  t.teardown(async () => {
    await store.close();
    removeDir(dataDir);
  });
  const things = store.collection<{ id: string; n: number }>({ name: 'things' });
  await things.insert({ id: 'old', n: 0 });
  const flags = new Int32Array(new SharedArrayBuffer(8));
  const writer = new Worker(WRITER, { eval: true, workerData: { dataDir, flags: flags.buffer, storeModule: new URL('../store/mod.js', import.meta.url).href } });
  t.teardown(() => writer.terminate());
  await new Promise((resolve) => writer.once('message', resolve));

  // One synchronous stretch, as one busy turn of the event loop: a read (which begins this thread's snapshot),
  // the other thread's commit, then a read of what it committed.
  const before = things.get('old');
  Atomics.store(flags, 0, 1);
  Atomics.notify(flags, 0);
  t.equal(Atomics.wait(flags, 1, 0, 10_000), 'ok', 'the writer committed');
  const fresh = things.get('fresh');
  t.same(await before, { id: 'old', n: 0 });
  t.same(await fresh, { id: 'fresh', n: 1 }, 'found, though this thread read before the commit');
});
