/**
 * The journal under crashes, and the projection runner (embedded: a worker thread of the platform process):
 * a process killed mid-run leaves every snapshot version with exactly its journal entry; a runner killed
 * between commit and projection resumes from its checkpoint and loses or doubles nothing; a projection
 * rebuilt from the journal (`POST /admin/v1/runtime/projections/{name}/rebuild`) equals the one built live.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type Store } from '../store/mod.js';
import { eventually } from './helpers/eventually.js';
import { countsOf } from './helpers/projector.js';
import { http } from './helpers/http.js';
import { waitForProjections } from './helpers/projections.js';
import { DIST, removeDir, startPlatformWithStore } from './helpers/platform.js';

/** As many counters as `helpers/journal-child.ts` drives. */
const COUNTERS = 50;
/** How long a replaying runner may go without advancing its checkpoint before the test gives up on it. */
const STALL_MS = 30_000;

const CHILD = join(DIST, 'test', 'helpers', 'journal-child.js');
const PROJECTOR = join(DIST, 'test', 'helpers', 'projector.js');
const dir = mkdtempSync(join(tmpdir(), 'sb-journal-'));
t.teardown(() => removeDir(dir));
// A replay on a loaded machine may take longer than the suite's 180 s a file; STALL_MS bounds a stuck one.
t.setTimeout(300_000);

interface Child {
  proc: ChildProcess;
  exited: Promise<unknown>;
  /** The last `checkpoint N` the child printed (a projecting child's lowest partition checkpoint), or 0. */
  checkpoint: () => number;
}

/** Starts the child; resolves once it printed a line matching `until`. */
function child(args: string[], until: RegExp): Promise<Child> {
  const proc = spawn(process.execPath, [CHILD, dir, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((r) => proc.once('exit', r));
  let out = '';
  let err = '';
  let checkpoint = 0;
  let partial = '';
  proc.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    proc.stdout!.on('data', (d) => {
      out += d;
      // Whole lines only: a chunk may end inside one.
      const lines = (partial + d).split('\n');
      partial = lines.pop()!;
      for (const line of lines) if (line.startsWith('checkpoint ')) checkpoint = Number(line.slice('checkpoint '.length));
      if (until.test(out)) resolve({ proc, exited, checkpoint: () => checkpoint });
    });
    void exited.then(() => reject(new Error(`child exited early:\n${out}\n${err}`)));
  });
}

async function kill(c: Child): Promise<void> {
  if (c.proc.pid) c.proc.kill('SIGKILL');
  await c.exited;
}

/**
 * Reads the store in a short-lived handle of this process, only while no child runs: with lmdb-js 3.5.6, a
 * process opening an LMDB file can roll back a commit another process makes during the open
 * (docs/storage.md), so a running child reports its progress on stdout instead.
 */
async function withStore<T>(read: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore({ dataDir: dir });
  try {
    return await read(store);
  } finally {
    await store.close();
  }
}

const checkpointOf = (store: Store) => store.collection<{ id: string; partitions: Record<string, number> }>({ name: 'projection_checkpoints', readModel: true }).get('test-counts')
  .then((doc) => Math.min(...[0, 1, 2, 3].map((p) => doc?.partitions[p] ?? 0)));

const versions: number[] = [];

t.test('a process killed mid-run leaves every snapshot version with exactly its entry', async (t) => {
  const writer = await child(['commit'], /committed 3000\n/);
  await kill(writer);
  await withStore(async (store) => {
    let total = 0;
    for (let i = 0; i < COUNTERS; i++) {
      const key = `counter/c-${i}`;
      const version = (await store.snapshots.get(key))?.version ?? 0;
      versions[i] = version;
      total += version;
      const entries = await store.journal.ofActor(key);
      const expected = Array.from({ length: version }, (_, v) => v + 1);
      if (entries.map((e) => e.version).join() !== expected.join()) t.fail(`${key}: versions ${entries.map((e) => e.version)} for snapshot version ${version}`);
      const wrong = entries.find((e) => e.events.length !== 1 || e.events[0].data.count !== e.version);
      if (wrong) t.fail(`${key}: entry of version ${wrong.version} has events ${JSON.stringify(wrong.events)}`);
    }
    t.ok(total >= 3000, `${total} steps committed before the kill`);
    const all = await store.journal.read(0, total + 10);
    t.equal(all.length, total, 'the journal holds one entry per snapshot version, no more');
    t.equal(await store.journal.head(), all[all.length - 1].seq);
  });
});

t.test('a runner killed between commit and projection resumes from its checkpoint: nothing lost, nothing doubled', async (t) => {
  const head = await withStore((store) => store.journal.head());
  // Small batches: the checkpoint creeps, so the kill lands with part of the journal projected.
  const first = await child(['project', '20'], /ready\n/);
  const reached = await eventually(async () => first.checkpoint(), 20_000, 'a checkpoint', 5);
  await kill(first);
  const atKill = await withStore(checkpointOf);
  t.ok(reached > 0 && atKill < head, `killed with the checkpoint at ${atKill} of ${head}`);
  const second = await child(['project', '200'], /ready\n/);
  t.teardown(() => kill(second));
  // Waited for while it advances: on a loaded machine the replay is slow, a stuck runner stops advancing.
  let last = atKill;
  let lastMoved = Date.now();
  const reachedHead = await eventually(async () => {
    const checkpoint = second.checkpoint();
    if (checkpoint > last) [last, lastMoved] = [checkpoint, Date.now()];
    return checkpoint >= head || Date.now() - lastMoved > STALL_MS ? checkpoint : 0;
  }, 10 * 60_000, 'the runner to reach the head or stall', 50);
  t.ok(reachedHead >= head, `the restarted runner reaches the head (${reachedHead} of ${head})`);
  await kill(second);
  const counts = await withStore((store) => countsOf(store).find({}));
  const byKey = new Map(counts.map((c) => [c.id, c]));
  for (let i = 0; i < COUNTERS; i++) {
    const c = byKey.get(`counter/c-${i}`);
    t.same(c && { version: c.version, steps: c.steps, incremented: c.incremented }, { version: versions[i], steps: versions[i], incremented: versions[i] }, `counter/c-${i}`);
  }
});

t.test('a projection rebuilt from the journal equals the one built live (admin API)', async (t) => {
  // This process reads through a handle opened before the platform starts (see `withStore`).
  const { p, store: reader } = await startPlatformWithStore({ dataDir: dir, env: { PROJECTION_MODULES: PROJECTOR, PROJECTION_PARTITIONS: '4', SHARDS: '16' } });
  t.teardown(() => reader.close());
  t.teardown(() => p.stop());
  const admin = (method: string, path: string) => http(p.edge, method, `/admin/v1/runtime/projections${path}`, { headers: { authorization: `Bearer ${p.operatorToken}` } });
  const live = await admin('GET', '?wait=1');
  t.equal(live.status, 200);
  // The registry's own projectors are listed too: the test's is found by name.
  const counts = (body: any) => body.projections.find((x: any) => x.name === 'test-counts');
  t.match(live.body, { caughtUp: true, partitions: 4 });
  t.match(counts(live.body), { name: 'test-counts', kinds: ['counter'], epoch: 0 });
  t.equal(counts(live.body).checkpoint, live.body.head, 'caught up with the head');
  const read = () => {
    reader.refresh();
    return countsOf(reader).find({}, { sort: { id: 1 } });
  };
  const before = await read();
  t.equal(before.length, COUNTERS);

  const rebuilt = await admin('POST', '/test-counts/rebuild');
  t.equal(rebuilt.status, 202);
  t.match(rebuilt.body, { name: 'test-counts', epoch: 1, checkpoint: 0 });
  await waitForProjections(p);
  const after = await admin('GET', '');
  t.match(after.body, { caughtUp: true });
  t.match(counts(after.body), { epoch: 1 });
  t.equal(counts(after.body).checkpoint, after.body.head);
  t.same(await read(), before, 'the same read model');

  const unknown = await admin('POST', '/no-such-model/rebuild');
  t.equal(unknown.status, 404);
  t.match(unknown.body, { message: 'projection not found' });
  const status = await admin('GET', '');
  t.match(counts(status.body), { lag: { p50: Number, p99: Number, samples: Number } }, 'the runner reports its lag');
});
