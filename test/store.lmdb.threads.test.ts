/**
 * The embedded store read from two threads of one process, as the platform does (the main thread, the edge
 * thread, the projection thread). lmdb-js keeps one read snapshot per thread until its next timers phase: a
 * record another thread has just committed is found all the same (a miss reads again), and `refresh()` makes
 * a record another thread has just deleted gone at once (what a tenancy invalidation calls).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import t, { type Test } from 'tap';
import { openStore } from '../store/mod.js';
import { removeDir } from './helpers/platform.js';

/** The writer thread: opens the same store, waits for `go`, inserts `fresh` or deletes `doomed`, then says `done`. */
const WRITER = `
const { workerData, parentPort } = require('node:worker_threads');
(async () => {
  const { openStore } = await import(workerData.storeModule);
  const store = await openStore({ dataDir: workerData.dataDir });
  const things = store.collection({ name: 'things' });
  const flags = new Int32Array(workerData.flags);
  parentPort.postMessage('ready');
  Atomics.wait(flags, 0, 0);
  if (workerData.op === 'insert') await things.insert({ id: 'fresh', n: 1 });
  else await things.delete({ id: 'doomed' });
  Atomics.store(flags, 1, 1);
  Atomics.notify(flags, 1);
})();
`;

/** A store with `old` (and `doomed`) in `things`, and a writer thread ready to do `op` when told. */
async function withWriter(t: Test, op: 'insert' | 'delete') {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-threads-'));
  const store = await openStore({ dataDir });
  t.teardown(async () => {
    await store.close();
    removeDir(dataDir);
  });
  const things = store.collection<{ id: string; n: number }>({ name: 'things' });
  await things.insert({ id: 'old', n: 0 });
  await things.insert({ id: 'doomed', n: 2 });
  const flags = new Int32Array(new SharedArrayBuffer(8));
  const writer = new Worker(WRITER, { eval: true, workerData: { op, dataDir, flags: flags.buffer, storeModule: new URL('../store/mod.js', import.meta.url).href } });
  t.teardown(() => writer.terminate());
  await new Promise((resolve) => writer.once('message', resolve));
  return { store, things, flags };
}

t.test('a record committed by another thread after this thread began its read snapshot is found', async (t) => {
  const { things, flags } = await withWriter(t, 'insert');

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

t.test('refresh(): a record another thread deleted after this thread began its read snapshot is gone', async (t) => {
  const { store, things, flags } = await withWriter(t, 'delete');
  const before = things.get('old');
  Atomics.store(flags, 0, 1);
  Atomics.notify(flags, 0);
  t.equal(Atomics.wait(flags, 1, 0, 10_000), 'ok', 'the writer committed');
  const stale = things.get('doomed');
  store.refresh();
  const after = things.get('doomed');
  t.same(await before, { id: 'old', n: 0 });
  t.same(await stale, { id: 'doomed', n: 2 }, "still there in this thread's snapshot");
  t.equal(await after, null, 'gone once refreshed');
});
