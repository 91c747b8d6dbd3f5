/**
 * The projection runner in-process, one cycle at a time: it applies only the partitions it owns and the
 * kinds a projector reads, moves only its own partitions' checkpoints, cannot save over a rebuild that
 * started during its batch, drops the lag figures of runners long gone, retries a failed apply, and sets aside
 * an entry that fails every time (and only such an entry).
 */
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type JournalEntry, type Store } from '../store/mod.js';
import { ProjectionStatus, partitionOf, type Projector } from '../actors/mod.js';
import { PROJECTION_ATTEMPTS, PROJECTION_SKIP_STREAK, ProjectionRunner } from '../actors/projection/runner.js';
import { Checkpoints } from '../actors/projection/checkpoints.js';
import { Skipped } from '../actors/projection/skipped.js';
import { countWritesInFlight } from './helpers/in-flight.js';
import { removeDir } from './helpers/platform.js';

const dir = mkdtempSync(join(tmpdir(), 'sb-runner-'));
let store: Store;
t.before(async () => {
  store = await openStore({ dataDir: dir });
});
t.teardown(async () => {
  await store.close();
  removeDir(dir);
});

/** A projector that records what it was handed. */
function recorder(name: string, kinds?: string[], during?: () => Promise<void>): Projector & { seen: JournalEntry[] } {
  const seen: JournalEntry[] = [];
  return {
    name,
    kinds,
    seen,
    async apply(entries) {
      seen.push(...entries);
      await during?.();
    },
    async reset() {
      seen.length = 0;
    },
  };
}

/** What a runner logged at error level. */
type Logged = { msg: string; extra?: object }[];

// No wait between retries: the cycles run through them at once (the runner's option for tests).
const runner = (projectors: Projector[], owned: number[], runnerId = 'r1', errors: Logged = []) =>
  new ProjectionRunner({ store, projectors, partitions: 4, owned: () => owned, batch: 1000, runnerId, pollMs: 1000, waitForWork: async () => undefined, backoffMs: () => 0, error: (msg, extra) => errors.push({ msg, extra }) });

/** The entries set aside for a projection, as recorded. */
const skippedOf = (projection: string) => new Skipped(store).records.find({ projection }, { sort: { seq: 1 } });

async function step(key: string, shard: number, version: number): Promise<void> {
  await store.snapshots.putMany([{ key, data: new Uint8Array([version]), expectedVersion: version - 1, fence: 1, shard, deadline: null, step: { value: 'v', events: [] } }]);
}

t.test('a runner applies its partitions and its projector\'s kinds, and moves only its checkpoints', async (t) => {
  for (let shard = 0; shard < 8; shard++) {
    await step(`counter/s${shard}`, shard, 1);
    await step(`other/s${shard}`, shard, 1);
  }
  await store.journal.append({ key: 'edge/p1', kind: 'edge', id: 'p1', shard: -1, version: 0, value: null, events: [] });
  const head = await store.journal.head();
  const counters = recorder('runner-counters', ['counter']);
  const all = recorder('runner-all');
  t.equal(await runner([counters, all], [0, 1]).cycle(), 17, 'read the whole journal');
  t.same(counters.seen.map((e) => e.key).sort(), ['counter/s0', 'counter/s1', 'counter/s4', 'counter/s5'], 'its kind, shards of partitions 0 and 1');
  const mine = (e: JournalEntry) => [0, 1].includes(partitionOf(e, 4));
  t.ok(all.seen.every(mine) && all.seen.length === (await store.journal.read(0, 100)).filter(mine).length, 'every kind when it names none');
  const doc = await new Checkpoints(store).load('runner-counters');
  t.same(doc.partitions, { 0: head, 1: head }, 'partitions 2 and 3 are left to their owner');
  t.match(doc.runners.r1, { p50: Number, p99: Number, samples: 4 });

  const other = recorder('runner-counters', ['counter']);
  await runner([other], [2, 3], 'r2').cycle();
  t.same(other.seen.map((e) => e.key).sort(), ['counter/s2', 'counter/s3', 'counter/s6', 'counter/s7'], 'the other partitions, by their owner');
  t.equal(await runner([other], [2, 3], 'r2').cycle(), 0, 'nothing more');
  const status = await new ProjectionStatus(store, [counters], 4).all();
  t.match(status, [{ name: 'runner-counters', checkpoint: head, head, behind: 0, epoch: 0, kinds: ['counter'] }]);
});

t.test('a rebuild during a batch wins: the runner cannot save over it, and replays from 0', async (t) => {
  const status = new ProjectionStatus(store, [], 4);
  let rebuilt = false;
  const p: Projector & { seen: JournalEntry[] } = recorder('runner-rebuilt', ['counter'], async () => {
    if (rebuilt) return;
    rebuilt = true;
    await status.rebuild(p);
  });
  const r = runner([p], [0, 1, 2, 3]);
  await r.cycle();
  const doc = await new Checkpoints(store).load('runner-rebuilt');
  t.equal(doc.epoch, 1);
  t.same(doc.partitions, {}, 'the half-done batch did not move the new epoch\'s checkpoints');
  await r.cycle();
  t.equal(p.seen.length, 8, 'replayed from 0 after the reset');
  t.equal(Math.min(...Object.values((await new Checkpoints(store).load('runner-rebuilt')).partitions)), await store.journal.head());
});

t.test('lag figures of runners gone for ten minutes are dropped', async (t) => {
  const checkpoints = new Checkpoints(store);
  const doc = await checkpoints.load('runner-stale');
  await checkpoints.save('runner-stale', doc.epoch, new Map(), { id: 'gone', lag: { p50: 1, p99: 2, samples: 3, at: Date.now() - 700_000 } });
  await step('counter/late', 0, 1);
  await runner([recorder('runner-stale', ['counter'])], [0, 1, 2, 3], 'r3').cycle();
  t.same(Object.keys((await checkpoints.load('runner-stale')).runners), ['r3']);
});

t.test('a cycle stores its projectors\' checkpoints together, after every projector has applied', async (t) => {
  // Counts the checkpoint writes in flight at once on the real store: stored together, they share one group
  // commit; stored as each projector finished, each was a commit and a flush of its own.
  const counted = countWritesInFlight(store, 'projection_checkpoints');
  await step('counter/together', 1, 1);
  // Projectors that finish at different times: the quick ones' checkpoints wait for the slow one.
  const projectors = [0, 5, 20].map((ms) => recorder(`runner-together-${ms}`, ['counter'], () => new Promise((r) => setTimeout(r, ms))));
  const r = new ProjectionRunner({ store: counted.store, projectors, partitions: 4, owned: () => [0, 1, 2, 3], batch: 1000, runnerId: 'r4', pollMs: 1000, waitForWork: async () => undefined });
  await r.cycle();
  t.equal(counted.most(), projectors.length, 'every checkpoint write in flight at once');
  const head = await store.journal.head();
  for (const p of projectors) t.same(Object.values((await new Checkpoints(store).load(p.name)).partitions), [head, head, head, head], `${p.name} moved`);
});

t.test('a projector that fails on every entry keeps its checkpoint, sets none aside, and holds up no other', async (t) => {
  await step('counter/broken', 2, 1);
  const good = recorder('runner-good', ['counter']);
  let tries = 0;
  const broken: Projector = { name: 'runner-broken', kinds: ['counter'], apply: async () => (tries++, Promise.reject(new Error('broken projector'))), reset: async () => undefined };
  const errors: Logged = [];
  const r = runner([good, broken], [0, 1, 2, 3], 'r5', errors);
  t.ok((await store.journal.read(0, 1000)).filter((e) => e.kind === 'counter').length > PROJECTION_SKIP_STREAK, 'more entries than the streak of entries set aside');
  await t.rejects(r.cycle(), /broken projector/, 'the cycle reports the failure');
  tries = 0;
  await t.rejects(r.cycle(), /broken projector/, 'and again at the next');
  t.equal(tries, 1, 'held: tried once a cycle, with no retries to hold up the others');
  const head = await store.journal.head();
  t.same(Object.values((await new Checkpoints(store).load('runner-good')).partitions), [head, head, head, head], 'the other projector moved on');
  t.same((await new Checkpoints(store).load('runner-broken')).partitions, {}, 'the failing one stays where it was: its entries come again');
  t.same(await skippedOf('runner-broken'), [], 'not one entry set aside: the fault is the projector\'s, not an entry\'s');
  t.match(await new ProjectionStatus(store, [broken], 4).all(), [{ name: 'runner-broken', checkpoint: 0, skipped: 0 }]);
  t.match(errors, [{ msg: /projection held/, extra: { projector: 'runner-broken', streak: PROJECTION_SKIP_STREAK } }], 'logged once, at error level');
});

t.test('an entry a projector fails on every time is set aside after its retries; the checkpoint passes it', async (t) => {
  await step('counter/before-poison', 3, 1);
  await step('counter/poison', 3, 1);
  await step('counter/after-poison', 3, 1);
  const poison = (await store.journal.read(0, 1000)).find((e) => e.key === 'counter/poison')!;
  let fixed = false;
  let alone = 0;
  const seen: JournalEntry[] = [];
  // As the stemmer's overflow did: the batch that holds the entry throws, whatever else it holds.
  const poisoned: Projector = {
    name: 'runner-poisoned',
    kinds: ['counter'],
    async apply(entries) {
      if (!fixed && entries.some((e) => e.key === 'counter/poison')) {
        if (entries.length === 1) alone++;
        throw new RangeError('Maximum call stack size exceeded');
      }
      seen.push(...entries);
    },
    async reset() {
      seen.length = 0;
    },
  };
  const good = recorder('runner-poisoned-good', ['counter']);
  const errors: Logged = [];
  const r = runner([poisoned, good], [0, 1, 2, 3], 'r7', errors);
  const counters = (await store.journal.read(0, 1000)).filter((e) => e.kind === 'counter');
  t.equal(await r.cycle(), (await store.journal.read(0, 1000)).length, 'the cycle goes through');
  const head = await store.journal.head();
  t.equal(alone, PROJECTION_ATTEMPTS, 'the entry alone was tried as often as a batch before it was set aside');
  t.same(seen.map((e) => e.seq).sort((a, b) => a - b), counters.filter((e) => e.seq !== poison.seq).map((e) => e.seq), 'every other entry projected, those after it included');
  t.same(Object.values((await new Checkpoints(store).load('runner-poisoned')).partitions), [head, head, head, head], 'the checkpoint passed it');
  t.match(await skippedOf('runner-poisoned'), [{ projection: 'runner-poisoned', epoch: 0, seq: poison.seq, key: 'counter/poison', error: 'RangeError: Maximum call stack size exceeded', at: Number }], 'recorded');
  t.equal((await skippedOf('runner-poisoned')).length, 1, 'that entry alone');
  t.same(errors.map((e) => e.extra), [{ projector: 'runner-poisoned', seq: poison.seq, key: 'counter/poison', err: 'RangeError: Maximum call stack size exceeded' }], 'logged at error level: projection, seq, key, error');
  const status = new ProjectionStatus(store, [poisoned, good], 4);
  t.match(await status.all(), [{ name: 'runner-poisoned', checkpoint: head, behind: 0, skipped: 1 }, { name: 'runner-poisoned-good', checkpoint: head, skipped: 0 }], 'the status shows it');
  t.ok(good.seen.some((e) => e.seq === poison.seq), 'the other projector projected the entry, untouched');
  t.equal(await r.cycle(), 0, 'nothing comes again');

  // Fixed, then rebuilt: the replay projects it, and the new epoch has nothing set aside.
  fixed = true;
  await status.rebuild(poisoned);
  await r.cycle();
  t.ok(seen.some((e) => e.seq === poison.seq), 'the rebuild projected the entry set aside');
  t.match(await status.all(), [{ name: 'runner-poisoned', checkpoint: head, epoch: 1, skipped: 0 }]);
});

t.test('an entry that fails once is retried and projected, not set aside', async (t) => {
  await step('counter/flaky', 1, 1);
  const flaky = (await store.journal.read(0, 1000)).find((e) => e.key === 'counter/flaky')!;
  let failed = 0;
  const p = recorder('runner-flaky', ['counter'], async () => undefined);
  const apply = p.apply.bind(p);
  p.apply = async (entries, s, partitions) => {
    if (failed === 0 && entries.some((e) => e.seq === flaky.seq)) {
      failed++;
      throw new Error('injected: the write failed');
    }
    return apply(entries, s, partitions);
  };
  const errors: Logged = [];
  await runner([p], [0, 1, 2, 3], 'r8', errors).cycle();
  const head = await store.journal.head();
  t.equal(failed, 1, 'it failed once');
  t.ok(p.seen.some((e) => e.seq === flaky.seq), 'then was projected');
  t.same(Object.values((await new Checkpoints(store).load('runner-flaky')).partitions), [head, head, head, head]);
  t.same(await skippedOf('runner-flaky'), [], 'nothing set aside');
  t.match(await new ProjectionStatus(store, [p], 4).all(), [{ name: 'runner-flaky', skipped: 0 }]);
  t.same(errors, [], 'nothing logged at error level');
});

t.test('with other runners on the partitions, a rebuild\'s reset waits for batches they read before it', async (t) => {
  const status = new ProjectionStatus(store, [], 4);
  const name = 'runner-shared-rebuild';
  let resets = 0;
  const counting = (p: Projector): Projector => Object.assign({}, p, { reset: async () => void resets++ });
  // Runner 1 (partitions 2 and 3, another process over NATS) is half-way through a batch when the rebuild is
  // asked for; runner 0 (partitions 0 and 1, which resets) cycles meanwhile.
  let other!: () => void;
  const otherBatch = new Promise<void>((r) => (other = r));
  let asked!: () => void;
  const rebuildAsked = new Promise<void>((r) => (asked = r));
  let first = true;
  const p1 = counting(recorder(name, ['counter'], async () => {
    if (!first) return;
    first = false;
    await status.rebuild(p1);
    asked();
    await otherBatch;
  }));
  const p0 = counting(recorder(name, ['counter']));
  const r0 = runner([p0], [0, 1], 'r0');
  const r1 = runner([p1], [2, 3], 'r1');
  const inFlight = r1.cycle();
  await rebuildAsked;
  await r0.cycle();
  t.equal(resets, 0, 'not reset while a batch read before the rebuild may still be writing');
  other();
  await inFlight;
  // The grace over (its start moved back rather than waited for).
  await new Checkpoints(store).records.update({ id: name }, { $set: { updated_at: Date.now() - 60_000 } });
  await r0.cycle();
  t.equal(resets, 1, 'then reset once');
  t.notOk((await new Checkpoints(store).load(name)).resetting, 'and replayed');
});
