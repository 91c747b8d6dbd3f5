/**
 * What another thread sends a runtime is handled against every write that thread had committed before it
 * sent (`actors/transport/arrival.ts`). lmdb-js reads through one snapshot per thread until the thread's next
 * timers phase; the runtime refreshes it when a post arrives from the thread it serves, so an actor never
 * reads what stood before a write its asker had seen committed (a rotated secret, a deployment).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageChannel, Worker } from 'node:worker_threads';
import t from 'tap';
import { startRuntime } from '../actors/mod.js';
import { openStore } from '../store/mod.js';
import { removeDir } from './helpers/platform.js';

/**
 * The other thread (as the edge thread is): it asks `test.read` once; when told that the main thread has read
 * (`flags[0]`), it updates the record, asks again and, once that ask is posted, says so (`flags[1]`). Then it
 * reports both answers.
 */
const THREAD = `
const { workerData, parentPort } = require('node:worker_threads');
(async () => {
  const { openStore } = await import(workerData.storeModule);
  const { portTransport } = await import(workerData.transportModule);
  const store = await openStore({ dataDir: workerData.dataDir });
  const things = store.collection({ name: 'things' });
  const transport = portTransport(workerData.port);
  const flags = new Int32Array(workerData.flags);
  const ask = () => transport.request('test.read', new Uint8Array(), 5000).then((d) => new TextDecoder().decode(d));
  const first = ask();
  await Atomics.waitAsync(flags, 0, 0).value;
  await things.update({ id: 'x' }, { $set: { n: 1 } });
  const second = ask();
  // The outbox posts at the check phase: two of them and the ask has surely crossed.
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  Atomics.store(flags, 1, 1);
  Atomics.notify(flags, 1);
  parentPort.postMessage(await Promise.all([first, second]));
})();
`;

t.test("an ask from another thread reads what that thread committed before it asked, in the same turn of this thread", async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-fresh-'));
  const store = await openStore({ dataDir });
  const runtime = await startRuntime({ store, worker: false, shardCount: 8, leaseTtlMs: 3000, passivateAfterMs: 60_000, askTimeoutMs: 5000 });
  t.teardown(async () => {
    await runtime.stop();
    await store.close();
    removeDir(dataDir);
  });
  const things = store.collection<{ id: string; n: number }>({ name: 'things' });
  await things.insert({ id: 'x', n: 0 });
  const flags = new Int32Array(new SharedArrayBuffer(8));
  let asks = 0;
  runtime.transport.subscribe('test.read', (_data, respond) => {
    // The read begins this thread's snapshot (the first ask) or reads through it (the second).
    void things.get('x').then((x) => respond?.(new TextEncoder().encode(String(x?.n))));
    if (++asks > 1) return;
    // The first ask holds this thread in its turn until the other thread has committed and sent the second,
    // which the port then hands over in the same turn: no timers phase renews the snapshot in between.
    Atomics.store(flags, 0, 1);
    Atomics.notify(flags, 0);
    if (Atomics.wait(flags, 1, 0, 10_000) !== 'ok') throw new Error('the other thread did not ask again');
  });
  const { port1, port2 } = new MessageChannel();
  runtime.servePort(port1);
  const thread = new Worker(THREAD, {
    eval: true,
    transferList: [port2],
    workerData: {
      dataDir, port: port2, flags: flags.buffer,
      storeModule: new URL('../store/mod.js', import.meta.url).href, transportModule: new URL('../actors/transport/mod.js', import.meta.url).href,
    },
  });
  t.teardown(() => thread.terminate());
  const answers = await new Promise((resolve, reject) => {
    thread.once('message', resolve);
    thread.once('error', reject);
  });
  t.same(answers, ['0', '1'], 'the second ask reads the update its sender committed before sending it');
});
