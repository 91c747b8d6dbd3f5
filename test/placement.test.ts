/**
 * Placement against a real nats-server: workers joining, leaving, dying (SIGKILL of a child process) and
 * stalling (SIGSTOP past the lease TTL), checked against the rendezvous expectation; fences; the local
 * placement. Waits poll generously; nothing asserts how long anything took.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import t, { type Test } from 'tap';
import fc from 'fast-check';
import {
  createLocalPlacement,
  createLocalWorkerDirectory,
  createNatsPlacement,
  createNatsWorkerDirectory,
  DEFAULT_SHARDS,
  ownerOf,
  shardOf,
  type Placement,
} from '../actors/placement/mod.js';
import { natsAvailable, startNats, type NatsServer } from './helpers/nats.js';

const FIXTURE = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'placement-worker.js');
const SHARDS = 64;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it holds; throws (naming `what`) after a generous `ms`. */
async function until(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await sleep(20);
  }
}

/** The shards `id` should own among `workers`, by rendezvous hashing. */
function expected(id: string, workers: string[]): number[] {
  return Array.from({ length: SHARDS }, (_, s) => s).filter((s) => ownerOf(s, workers, SHARDS) === id);
}

const same = (a: number[], b: number[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Every fence seen, per shard: an acquisition must carry a fence larger than all earlier ones, whoever
 * held the shard before.
 */
class FenceLog {
  readonly highest = new Map<number, number>();
  readonly violations: string[] = [];
  acquisitions = 0;

  acquired(worker: string, shard: number, fence: number): void {
    this.acquisitions++;
    const before = this.highest.get(shard) ?? 0;
    if (fence <= before) this.violations.push(`${worker} acquired shard ${shard} with fence ${fence} <= ${before}`);
    this.seen(shard, fence);
  }

  seen(shard: number, fence: number): void {
    if (fence > (this.highest.get(shard) ?? 0)) this.highest.set(shard, fence);
  }
}

interface Events {
  acquired: number[];
  releasing: number[];
  lost: number[];
}

interface InprocWorker extends Events {
  id: string;
  placement: Placement;
  nc: NatsConnection;
}

/** A worker in this process, with its own NATS connection. */
async function inprocWorker(
  t: Test,
  nats: NatsServer,
  id: string,
  opts: { prefix: string; ttl: number; fences: FenceLog; log?: (msg: string, extra?: object) => void },
): Promise<InprocWorker> {
  const nc = await connect({ servers: nats.url, name: id });
  const placement = createNatsPlacement({
    connection: nc,
    workerId: id,
    shardCount: SHARDS,
    leaseTtlMs: opts.ttl,
    bucketPrefix: opts.prefix,
    log: opts.log,
  });
  const w: InprocWorker = { id, placement, nc, acquired: [], releasing: [], lost: [] };
  t.teardown(async () => {
    await placement.stop();
    await nc.close();
  });
  await placement.start({
    acquired: (shard, fence) => {
      w.acquired.push(shard);
      opts.fences.acquired(id, shard, fence);
    },
    releasing: async (shard) => {
      w.releasing.push(shard);
    },
    lost: (shard) => {
      w.lost.push(shard);
    },
  });
  return w;
}

interface ChildWorker extends Events {
  id: string;
  child: ChildProcess;
  /** Shards acquired and neither being released nor lost, as far as its events tell. */
  holding: Set<number>;
  resumed: Record<number, number | null> | null;
  /** What it still counted as owned on waking (before or after its first round noticed the loss). */
  ownedOnResume: number[];
  exited: Promise<void>;
}

/** A worker in a child process (test/fixtures/placement-worker.ts); resolves once it has started. */
async function childWorker(
  t: Test,
  nats: NatsServer,
  id: string,
  opts: { prefix: string; ttl: number; fences: FenceLog },
): Promise<ChildWorker> {
  const child = spawn(process.execPath, [FIXTURE, nats.url, id, String(SHARDS), String(opts.ttl), opts.prefix], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
    }
    await exited;
  });
  const w: ChildWorker = { id, child, acquired: [], releasing: [], lost: [], holding: new Set(), resumed: null, ownedOnResume: [], exited };
  let started = false;
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const e = JSON.parse(line) as {
      type: string;
      shard: number;
      fence: number;
      fences: Record<number, number | null>;
      owned: number[];
    };
    if (e.type === 'started') started = true;
    else if (e.type === 'acquired') {
      w.acquired.push(e.shard);
      w.holding.add(e.shard);
      opts.fences.acquired(id, e.shard, e.fence);
    } else if (e.type === 'releasing') {
      w.releasing.push(e.shard);
      w.holding.delete(e.shard);
    } else if (e.type === 'lost') {
      w.lost.push(e.shard);
      w.holding.delete(e.shard);
    } else if (e.type === 'resumed') {
      w.resumed = e.fences;
      w.ownedOnResume = e.owned;
    }
  });
  await until(`${id} started`, () => {
    if (child.exitCode !== null) throw new Error(`${id} exited with ${child.exitCode}`);
    return started;
  });
  return w;
}

/**
 * Samples the in-process workers every few milliseconds: no shard may be owned, or fenced, by two of them
 * at once. Also feeds the fences it sees into the log.
 */
function sampleExclusive(workers: () => InprocWorker[], fences: FenceLog) {
  const doubles: string[] = [];
  let samples = 0;
  const timer = setInterval(() => {
    samples++;
    const owner = new Map<number, string>();
    const fenced = new Map<number, string>();
    for (const w of workers()) {
      for (const s of w.placement.owned()) {
        if (owner.has(s)) doubles.push(`shard ${s} owned by ${owner.get(s)} and ${w.id}`);
        owner.set(s, w.id);
      }
      for (let s = 0; s < SHARDS; s++) {
        const fence = w.placement.fenceOf(s);
        if (fence === null) continue;
        fences.seen(s, fence);
        if (fenced.has(s)) doubles.push(`shard ${s} fenced by ${fenced.get(s)} and ${w.id}`);
        fenced.set(s, w.id);
      }
    }
  }, 5);
  return {
    stop: () => clearInterval(timer),
    get doubles() {
      return doubles;
    },
    get samples() {
      return samples;
    },
  };
}

const balanced = (workers: Array<{ id: string; owns: () => number[] }>) => () => {
  const ids = workers.map((w) => w.id);
  return workers.every((w) => same(w.owns(), expected(w.id, ids)));
};
const inprocOwns = (w: InprocWorker) => ({ id: w.id, owns: () => w.placement.owned() });
const childOwns = (w: ChildWorker) => ({ id: w.id, owns: () => [...w.holding].sort((a, b) => a - b) });

t.test('shards spread evenly over the workers, the same on every node, most staying put as workers come and go', async (t) => {
  const id = fc.stringMatching(/^[a-z0-9-]{1,16}$/);
  fc.assert(
    fc.property(fc.uniqueArray(id, { minLength: 1, maxLength: 8 }), fc.integer({ min: 1, max: 256 }), (workers, shards) => {
      const owners = Array.from({ length: shards }, (_, s) => ownerOf(s, workers, shards));
      const counts = new Map<string, number>();
      for (const o of owners) counts.set(o!, (counts.get(o!) ?? 0) + 1);
      const reversed = Array.from({ length: shards }, (_, s) => ownerOf(s, [...workers].reverse(), shards));
      return owners.every((o) => o !== null && workers.includes(o)) && Math.max(...counts.values()) <= Math.ceil(shards / workers.length) && owners.every((o, s) => o === reversed[s]);
    }),
    { numRuns: 300 },
  );
  // A worker joining takes its share; the others' shards stay where they were, but for a few.
  const ids = ['worker-a', 'worker-b', 'worker-c', 'worker-d'];
  const before = Array.from({ length: SHARDS }, (_, s) => ownerOf(s, ids.slice(0, 3), SHARDS));
  const after = Array.from({ length: SHARDS }, (_, s) => ownerOf(s, ids, SHARDS));
  const moved = after.filter((o, s) => o !== before[s]);
  t.equal(after.filter((o) => o === 'worker-d').length, SHARDS / 4, 'the new worker takes its quarter');
  t.ok(moved.length < SHARDS / 2, `most shards keep their owner (${moved.length} of ${SHARDS} moved)`);
});

t.test('local placement: the fence it is given (the store\'s highest), at least 1', async (t) => {
  for (const [given, used] of [[4711, 4711], [0, 1], [undefined, 1]] as const) {
    const placement = createLocalPlacement({ shardCount: 2, workerId: 'solo', fence: given });
    const acquired: number[] = [];
    await placement.start({ acquired: (_shard, fence) => void acquired.push(fence), releasing: async () => {}, lost() {} });
    t.same(acquired, [used, used], `given ${given}: acquired with ${used}`);
    t.equal(placement.fenceOf(1), used);
    await placement.stop();
  }
});

t.test('local placement', async (t) => {
  const placement = createLocalPlacement({ shardCount: 8, workerId: 'solo' });
  const directory = createLocalWorkerDirectory(placement);
  t.equal(placement.workerId, 'solo');
  t.equal(placement.shardCount, 8);
  t.equal(placement.shardOf('conversation/c1'), shardOf('conversation/c1', 8));
  t.same(placement.owned(), []);
  t.equal(placement.fenceOf(0), null, 'no fence before start');
  t.same(await directory.workers(), []);

  const acquired: Array<[number, number]> = [];
  const releasing: number[] = [];
  await placement.start({
    acquired: (shard, fence) => {
      acquired.push([shard, fence]);
    },
    releasing: async (shard) => {
      releasing.push(shard);
    },
    lost: () => t.fail('the local placement never loses a shard'),
  });
  t.same(
    acquired,
    Array.from({ length: 8 }, (_, s) => [s, 1]),
    'every shard, fence 1',
  );
  t.same(placement.owned(), [0, 1, 2, 3, 4, 5, 6, 7]);
  t.equal(placement.fenceOf(5), 1);
  t.equal(placement.fenceOf(8), null, 'no such shard');
  await t.rejects(placement.start({ acquired() {}, releasing: async () => {}, lost() {} }), 'starts once');

  placement.reportLiveActors(42);
  t.match(await directory.workers(), [{ id: 'solo', shards: [0, 1, 2, 3, 4, 5, 6, 7], liveActors: 42 }]);

  await placement.stop();
  await placement.stop();
  t.same(releasing, [0, 1, 2, 3, 4, 5, 6, 7], 'releasing once per shard');
  t.same(placement.owned(), []);
  t.equal(placement.fenceOf(5), null);
  t.same(await directory.workers(), []);
  t.equal(createLocalPlacement().shardCount, DEFAULT_SHARDS);
});

t.test('nats placement', { skip: natsAvailable() ? false : 'nats-server is not installed' }, async (t) => {
  const nats = await startNats();
  t.teardown(() => nats.stop());

  t.test('workers join, spread by rendezvous, leave gracefully and die', async (t) => {
    const opts = { prefix: 'join', ttl: 1500, fences: new FenceLog() };
    const workers: InprocWorker[] = [];
    const sampler = sampleExclusive(() => workers, opts.fences);
    t.teardown(() => sampler.stop());

    const a = await inprocWorker(t, nats, 'A', opts);
    workers.push(a);
    t.same(a.placement.owned(), expected('A', ['A']), 'a lone worker owns every shard after start');
    t.same(a.acquired.length, SHARDS);
    t.ok(a.placement.owned().every((s) => a.placement.fenceOf(s) !== null), 'with a valid fence for each');

    const b = await inprocWorker(t, nats, 'B', opts);
    workers.push(b);
    const c = await inprocWorker(t, nats, 'C', opts);
    workers.push(c);
    await until('A, B and C own their rendezvous shards', balanced([a, b, c].map(inprocOwns)));
    for (const w of [a, b, c]) {
      t.same(w.placement.owned(), expected(w.id, ['A', 'B', 'C']), `${w.id} owns exactly its rendezvous shards`);
      t.ok(w.placement.owned().length > SHARDS / 6, `${w.id} has a fair share`);
    }
    t.same(a.lost, [], 'moving shards is releasing, not losing');
    t.same(a.releasing.sort((x, y) => x - y), [...expected('B', ['A', 'B', 'C']), ...expected('C', ['A', 'B', 'C'])].sort((x, y) => x - y));

    b.placement.reportLiveActors(7);
    const directory = createNatsWorkerDirectory(a.nc, 'join');
    await until('the directory shows every worker with its shards', async () => {
      const listed = await directory.workers();
      return (
        listed.length === 3 &&
        listed.every((w) => same(w.shards, expected(w.id, ['A', 'B', 'C']))) &&
        listed.find((w) => w.id === 'B')?.liveActors === 7
      );
    });
    t.match(await directory.workers(), [{ id: 'A' }, { id: 'B', liveActors: 7 }, { id: 'C' }]);

    // Graceful stop: releasing for each shard, leases and heartbeat deleted before stop resolves, so the
    // others need not wait for the TTL.
    const bShards = b.placement.owned();
    const releasedBefore = b.releasing.length;
    await b.placement.stop();
    t.same(b.releasing.slice(releasedBefore).sort((x, y) => x - y), bShards, 'B released each of its shards');
    t.same(b.placement.owned(), []);
    t.ok(bShards.every((s) => b.placement.fenceOf(s) === null), 'B vouches for no fence');
    t.same(b.lost, []);
    const shardsKv = await new Kvm(a.nc).open('join_shards');
    const held = await Promise.all(bShards.map((s) => shardsKv.get(`s${s}`)));
    t.ok(
      held.every((e) => e === null || e.operation !== 'PUT' || e.string() !== 'B'),
      'no lease key names B any more',
    );
    t.notOk((await directory.workers()).some((w) => w.id === 'B'), 'B left the directory at once');
    workers.splice(workers.indexOf(b), 1);
    await until('A and C take over B’s shards', balanced([a, c].map(inprocOwns)));

    // Abrupt death in process: the connection closes without stop.
    const cShards = c.placement.owned();
    await c.nc.close();
    await until('C hears that its shards are lost', () => c.lost.length === cShards.length);
    t.same(c.lost.sort((x, y) => x - y), cShards, 'C loses its shards when its connection closes');
    t.same(c.placement.owned(), []);
    workers.splice(workers.indexOf(c), 1);
    await until('A takes every shard after C’s leases expire', () => a.placement.owned().length === SHARDS);

    sampler.stop();
    t.ok(sampler.samples > 10, 'ownership was sampled');
    t.same(sampler.doubles, [], 'no shard was owned or fenced twice at any sample');
    t.same(opts.fences.violations, [], 'every acquisition had a larger fence than any before it');
    t.ok(opts.fences.acquisitions > SHARDS * 2, 'shards changed hands');
  });

  t.test('a killed worker loses its shards after the TTL', async (t) => {
    const opts = { prefix: 'kill', ttl: 1000, fences: new FenceLog() };
    const a = await inprocWorker(t, nats, 'A', opts);
    const b = await inprocWorker(t, nats, 'B', opts);
    const c = await childWorker(t, nats, 'C', opts);
    await until('A, B and the child C are balanced', balanced([inprocOwns(a), inprocOwns(b), childOwns(c)]));
    const cShards = [...c.holding];
    t.ok(cShards.length > 0, 'C owns shards');

    c.child.kill('SIGKILL');
    await c.exited;
    await until('A and B take over C’s shards', balanced([a, b].map(inprocOwns)));
    t.same([...a.lost, ...b.lost], [], 'the survivors lose nothing');
    t.ok(
      cShards.every((s) => a.placement.owned().includes(s) || b.placement.owned().includes(s)),
      'each of C’s shards has a new owner',
    );
    t.same(opts.fences.violations, [], 'each takeover carries a larger fence than C’s');
  });

  t.test('a stalled worker gets lost and stops vouching for its fences', async (t) => {
    const opts = { prefix: 'stall', ttl: 1000, fences: new FenceLog() };
    const a = await inprocWorker(t, nats, 'A', opts);
    const b = await inprocWorker(t, nats, 'B', opts);
    const c = await childWorker(t, nats, 'C', opts);
    await until('A, B and the child C are balanced', balanced([inprocOwns(a), inprocOwns(b), childOwns(c)]));
    const cShards = [...c.holding].sort((x, y) => x - y);

    c.child.kill('SIGSTOP');
    await until('A and B take over the stalled C’s shards', balanced([a, b].map(inprocOwns)));
    c.child.kill('SIGCONT');
    await until('C notices', () => c.resumed !== null && cShards.every((s) => c.lost.includes(s)));
    t.same(
      cShards.filter((s) => c.resumed![s] !== null),
      [],
      'on waking, C vouches for none of the fences it held',
    );
    t.same(c.lost.sort((x, y) => x - y), cShards, 'C is told it lost each of its shards');
    t.comment(`on waking C still counted ${c.ownedOnResume.length} of its ${cShards.length} shards as owned`);

    await until('C rejoins and gets its shards back', balanced([inprocOwns(a), inprocOwns(b), childOwns(c)]));
    t.same(opts.fences.violations, [], 'fences grew through every handover');

    c.child.kill('SIGTERM');
    await c.exited;
    t.equal(c.child.exitCode, 0, 'C stops gracefully');
    await until('A and B take C’s shards again', balanced([a, b].map(inprocOwns)));
  });

  t.test('with the broker gone, a worker writes one line per cause naming its shards, not one per shard', async (t) => {
    // A broker of its own, so that stopping it leaves the other tests theirs.
    const gone = await startNats();
    t.teardown(() => gone.stop());
    const lines: { msg: string; extra: { shard?: number; shards?: number[]; count?: number } }[] = [];
    const opts = { prefix: 'gone', ttl: 1000, fences: new FenceLog(), log: (msg: string, extra?: object) => lines.push({ msg, extra: extra ?? {} }) };
    const a = await inprocWorker(t, gone, 'A', opts);
    t.equal(a.placement.owned().length, SHARDS, 'a lone worker owns every shard');

    await gone.stop();
    await until('A gives up every lease', () => a.lost.length === SHARDS);
    await sleep(200);
    const shardsOf = (msg: string) =>
      lines.filter((l) => l.msg === msg).flatMap((l) => (l.extra.shards ?? (l.extra.shard === undefined ? [] : [l.extra.shard])));
    const lost = lines.filter((l) => l.msg === 'placement: lease lost');
    t.same(shardsOf('placement: lease lost').sort((x, y) => x - y), expected('A', ['A']), 'every lost shard is named once');
    t.ok(lost.length < SHARDS / 8, `the ${SHARDS} losses take ${lost.length} line(s)`);
    t.ok(lost.every((l) => l.extra.shards === undefined || l.extra.count === l.extra.shards.length), 'each line counts its shards');
    t.ok(lines.length < 16, `${lines.length} lines in all: ${[...new Set(lines.map((l) => l.msg))].join('; ')}`);
  });

  t.test('every worker of a deployment must use one TTL', async (t) => {
    const opts = { prefix: 'ttl', ttl: 1000, fences: new FenceLog() };
    await inprocWorker(t, nats, 'A', opts);
    const nc = await connect({ servers: nats.url });
    t.teardown(() => nc.close());
    const other = createNatsPlacement({ connection: nc, workerId: 'B', leaseTtlMs: 2000, bucketPrefix: 'ttl' });
    await t.rejects(
      other.start({ acquired() {}, releasing: async () => {}, lost() {} }),
      /TTL/,
      'a worker with another TTL is refused',
    );
    t.same(await createNatsWorkerDirectory(nc, 'nothing-here').workers(), [], 'no bucket, no workers');
  });

  t.test('the workers of a JetStream store add one fence base to its revisions: the stored fences\' highest', async (t) => {
    const ttl = 1000;
    const fences: Array<{ worker: string; fence: number }> = [];
    let floorReads = 0;
    // Each worker reads the floor at its own moment; the store's highest rises as writes land meanwhile.
    const floor = async () => 7_000 + floorReads++;
    const start = async (id: string) => {
      const nc = await connect({ servers: nats.url, name: id });
      const placement = createNatsPlacement({ connection: nc, workerId: id, shardCount: 8, leaseTtlMs: ttl, bucketPrefix: 'base', fenceFloor: floor });
      t.teardown(async () => {
        await placement.stop();
        await nc.close();
      });
      const began = performance.now();
      await placement.start({ acquired: (_shard, fence) => void fences.push({ worker: id, fence }), releasing: async () => {}, lost() {} });
      return { placement, took: performance.now() - began };
    };
    const [a, b, c] = await Promise.all(['A', 'B', 'C'].map(start));
    t.ok(a.took >= ttl && b.took >= ttl && c.took >= ttl, 'a store with fences but no base: each worker waits a TTL first');
    const nc = await connect({ servers: nats.url });
    t.teardown(() => nc.close());
    const base = Number((await (await new Kvm(nc).open('base_fences')).get('base'))!.string());
    t.ok(base >= 7_003, `the base is a floor read after every worker's wait began (${base})`);
    t.ok(fences.length > 0 && fences.every((f) => f.fence > base), 'every fence is above the base');
    for (const w of [a, b, c]) {
      for (const shard of w.placement.owned()) {
        const lease = await (await new Kvm(nc).open('base_shards')).get(`s${shard}`);
        const fence = w.placement.fenceOf(shard);
        // A renewal may land between the two reads.
        t.ok(fence === null || (fence > base && fence <= base + lease!.revision), `fenceOf is the base plus the lease's revision (${fence})`);
      }
    }
    const reads = floorReads;
    const late = await start('D');
    t.ok(late.took < ttl, 'a worker joining a store with a base does not wait');
    t.equal(floorReads, reads, 'nor reads the floor');
  });
});
