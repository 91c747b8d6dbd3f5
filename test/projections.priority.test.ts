/**
 * The projection thread yields the CPU while it keeps up (`actors/projection/priority.ts`): the runner says
 * after each read how far behind it is, the thread's `nice` goes up while that is small and back to normal once
 * it reaches `PROJECTION_YIELD_BELOW_MS`, and the platform's projection thread starts niced
 * (`PROJECTION_NICE`, 0: never). Taking the priority back needs root, `CAP_SYS_NICE` or an `RLIMIT_NICE` that
 * allows it; without, the thread never yields and the platform warns at start-up (a platform started with RLIMIT_NICE
 * 0 and, as root, without CAP_SYS_NICE).
 */
import t from 'tap';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { openStore, type Store } from '../store/mod.js';
import { ProjectionRunner } from '../actors/projection/runner.js';
import { removeDir, startPlatform } from './helpers/platform.js';
import { statFields } from './helpers/processes.js';
import { eventually } from './helpers/eventually.js';

const root = process.getuid?.() === 0;
const mustYield = root || process.env.CI === 'true';

/** The `nice` of every thread of process `pid` (field 19 of /proc/<pid>/task/<tid>/stat). */
function niceOfThreads(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) out.set(Number(tid), Number(statFields(`/proc/${pid}/task/${tid}/stat`)[19 - 3]));
  return out;
}

t.test('the runner says how far behind it is after each read: the age of the oldest entry read, 0 for none', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-priority-'));
  const store: Store = await openStore({ dataDir: dir });
  t.teardown(async () => {
    await store.close();
    removeDir(dir);
  });
  const told: number[] = [];
  const runner = new ProjectionRunner({
    store,
    projectors: [{ name: 'priority-all', async apply() {}, async reset() {} }],
    partitions: 1,
    owned: () => [0],
    batch: 1000,
    runnerId: 'p1',
    pollMs: 1000,
    waitForWork: async () => undefined,
    behind: (ms) => told.push(ms),
  });
  await store.journal.append({ key: 'edge/a', kind: 'edge', id: 'a', shard: -1, version: 0, value: null, events: [] });
  await new Promise((r) => setTimeout(r, 150));
  await store.journal.append({ key: 'edge/b', kind: 'edge', id: 'b', shard: -1, version: 0, value: null, events: [] });
  t.equal(await runner.cycle(), 2);
  t.equal(told.length, 1, 'once per read');
  t.ok(told[0] >= 150, `the oldest entry's age (${told[0]} ms), not the newest's`);
  t.equal(await runner.cycle(), 0);
  t.same(told.slice(1), [0], 'caught up: 0');
});

t.test('a thread yields while the runner keeps up and takes its priority back once it is behind', async (t) => {
  const url = new URL('../actors/projection/priority.js', import.meta.url).href;
  const helpers = new URL('./helpers/processes.js', import.meta.url).href;
  // In a thread of its own, as the runner's: the test's thread keeps its priority.
  const code = `
    const { parentPort } = require('node:worker_threads');
    Promise.all([import(${JSON.stringify(url)}), import(${JSON.stringify(helpers)})]).then(([{ ThreadPriority }, { statFields }]) => {
      const nice = () => Number(statFields('/proc/thread-self/stat')[19 - 3]);
      const base = nice();
      const p = ThreadPriority.ofThisThread(10, 100).priority;
      if (!p) return parentPort.postMessage({ created: false, base });
      const seen = [[p.isYielding, nice()]];
      for (const behind of [20, 150, 80, 60, 40, 120]) { p.observe(behind); seen.push([p.isYielding, nice()]); }
      parentPort.postMessage({ created: true, base, seen });
    });
  `;
  const r = await new Promise<{ created: boolean; base: number; seen?: Array<[boolean, number]> }>((resolve, reject) => {
    const w = new Worker(code, { eval: true });
    w.once('message', (m) => {
      resolve(m);
      void w.terminate();
    });
    w.once('error', reject);
  });
  if (!r.created) {
    t.notOk(mustYield, 'yields wherever it may take its priority back (root here, or CI)');
    return;
  }
  const b = r.base;
  t.same(r.seen, [
    [true, b + 10], // created yielding
    [true, b + 10], // 20 ms behind: keeps yielding
    [false, b], // 150 ms: past 100, its priority back
    [false, b], // 80 ms: not yet within half
    [false, b], // 60 ms
    [true, b + 10], // 40 ms: within half, yields again
    [false, b], // 120 ms
  ]);
});

t.test('the platform\'s projection thread runs niced, and PROJECTION_NICE=0 leaves every thread as it is', async (t) => {
  for (const nice of ['10', '0']) {
    const p = await startPlatform({ env: { PROJECTION_NICE: nice } });
    try {
      const threads = niceOfThreads(p.child.pid!);
      const base = threads.get(p.child.pid!)!;
      const niced = [...threads.values()].filter((n) => n !== base);
      if (nice === '0') t.same(niced, [], 'PROJECTION_NICE=0: none');
      else if (mustYield) t.same(niced, [base + 10], 'one thread, the projection runner\'s, at +10');
      else t.ok(niced.length <= 1, 'at most the projection thread');
    } finally {
      await p.stop();
      removeDir(p.dataDir);
    }
  }
});

t.test('without the permission to take its priority back, no thread yields and the platform warns at start-up', async (t) => {
  // RLIMIT_NICE 0 and, as root, CAP_SYS_NICE out of the bounding set: what a service without `LimitNICE=` has.
  const prefix = ['prlimit', '--nice=0:0', ...(root ? ['setpriv', '--bounding-set=-sys_nice', '--inh-caps=-sys_nice'] : [])];
  const p = await startPlatform({ prefix, env: { PROJECTION_NICE: '10', LOG_LEVEL: 'warn' } });
  try {
    const status = readFileSync(`/proc/${p.child.pid}/status`, 'utf8');
    t.equal((BigInt(`0x${/^CapEff:\s*(\S+)/m.exec(status)![1]}`) >> 23n) & 1n, 0n, 'the process has no CAP_SYS_NICE');
    const threads = niceOfThreads(p.child.pid!);
    const base = threads.get(p.child.pid!)!;
    t.same([...threads.values()].filter((n) => n !== base), [], 'no thread niced');
    await eventually(async () => /projection thread runs at normal priority/.test(p.stdout()), 20_000, 'the start-up warning');
    const line = JSON.parse(p.stdout().split('\n').find((l) => l.includes('projection thread runs at normal priority'))!);
    t.equal(line.level, 40, 'a warning');
    t.match(line.msg, /CAP_SYS_NICE, or RLIMIT_NICE of at least 20: LimitNICE=\+0 in a systemd unit, --ulimit nice=20 for Docker, ulimit -e 20/, 'names the limit to raise');
  } finally {
    await p.stop();
    removeDir(p.dataDir);
  }
  const quiet = await startPlatform({ prefix, env: { PROJECTION_NICE: '0', LOG_LEVEL: 'warn' } });
  try {
    await new Promise((r) => setTimeout(r, 500));
    t.notMatch(quiet.stdout(), /projection thread runs at normal priority/, 'PROJECTION_NICE=0: no warning');
  } finally {
    await quiet.stop();
    removeDir(quiet.dataDir);
  }
});
