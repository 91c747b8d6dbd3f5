import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtinKinds, startRuntime, type Runtime } from '../../actors/mod.js';
import { openStore, type SnapshotStore, type SnapshotWrite, type Store } from '../../store/mod.js';
import { removeDir } from './platform.js';

/**
 * The embedded store, whose commits a test can keep from being heard: while `held`, a durable batch's results
 * wait (as if the flush were slow), so what the host answers before a commit is durable shows.
 */
export class HeldCommits implements SnapshotStore {
  private gate: Promise<void> | null = null;
  private open: () => void = () => undefined;
  /** `durableInOrder`: the store's own, unless a test says otherwise (a store like MongoDB's). */
  constructor(
    private readonly inner: SnapshotStore,
    readonly durableInOrder = inner.durableInOrder,
  ) {}
  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }
  release(): void {
    this.gate = null;
    this.open();
  }
  /** The keys of the writes that reached the store, in order. */
  readonly written: string[] = [];
  get = (key: string) => this.inner.get(key);
  put: SnapshotStore['put'] = async (key, data, put) => (await this.putMany([{ key, data, ...put }]))[0];
  putMany = async (writes: SnapshotWrite[]) => {
    const gate = this.gate;
    for (const w of writes) this.written.push(w.key);
    const results = await this.inner.putMany(writes);
    await gate;
    return results;
  };
  due: SnapshotStore['due'] = (shards, before, limit) => this.inner.due(shards, before, limit);
  highestFence: SnapshotStore['highestFence'] = () => this.inner.highestFence();
  delete = (key: string) => this.inner.delete(key);
}

export const SHARDS = 16;

/** An in-process runtime on a fresh embedded store whose commits can be held; stopped at the end of `test`. */
export async function heldRuntime(test: { teardown: (f: () => Promise<void>) => void }, durableInOrder?: boolean): Promise<{ store: Store; held: HeldCommits; runtime: Runtime }> {
  const dir = mkdtempSync(join(tmpdir(), 'sb-held-'));
  const store = await openStore({ dataDir: dir });
  const held = new HeldCommits(store.snapshots, durableInOrder);
  const runtime = await startRuntime({ store: { ...store, snapshots: held }, worker: true, shardCount: SHARDS, leaseTtlMs: 3000, passivateAfterMs: 60_000, askTimeoutMs: 5000, kinds: builtinKinds() });
  test.teardown(async () => {
    held.release();
    await runtime.stop();
    await store.close();
    removeDir(dir);
  });
  return { store, held, runtime };
}

/** Whether `p` settles within a few turns of the event loop. */
export const settlesSoon = async (p: Promise<unknown>): Promise<boolean> => {
  let settled = false;
  void p.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 10));
  return settled;
};
