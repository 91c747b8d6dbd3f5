/**
 * The sandbox processes as the OS sees them, their limits, their replacement, and fairness between projects.
 */
import t from 'tap';
import fc from 'fast-check';
import { openSync, readFileSync, readdirSync, readlinkSync, writeFileSync, mkdtempSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createFunctionSandbox, MAX_STACK_KB, type ConvInput, type InvokeRequest, type InvokeResult } from '../actors/functions/mod.js';
import { FairQueue } from '../platform/fair-queue.js';
import { inheritedDescriptors } from '../platform/inherited-descriptors.js';
import { openStore } from '../store/mod.js';
import { loadConfig } from '../platform/config.js';
import { sandboxNodes } from './helpers/processes.js';
import { eventually } from './helpers/eventually.js';

const conv: ConvInput = { conversation_id: 'c', channel: 'chat', environment: 'live', variant: null, state: {}, integration_attributes: {}, metadata: {}, sip_headers: {}, variables: {} };
const call = (source: string, extra: Partial<InvokeRequest> = {}): InvokeRequest => ({ functions: { f: source }, name: 'f', conv, args: [], ...extra });
const inCI = process.env.CI === 'true';

/** The node process running the child script of the pool's process `pid` (or the test fails before signalling). */
function nodeBelow(pid: number | undefined): number {
  const found = pid === undefined ? [] : pid > 1 && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('child.js') && readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'node' ? [pid] : sandboxNodes(pid);
  if (found.length !== 1) throw new Error(`expected one sandbox node process below ${pid}, found ${found.length}`);
  return found[0];
}

t.test('a sandbox process has an empty environment, no descriptors of ours, and the OS isolation it can get', async (t) => {
  process.env.SANDBOX_CANARY = 'canary-in-the-parent';
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-sandbox-'));
  writeFileSync(join(dataDir, 'secret'), 'x');
  const fd = openSync(join(dataDir, 'secret'), 'r'); // a descriptor of ours that must not be inherited
  // The store, as the platform has it open: LMDB opens its files without close-on-exec.
  const store = await openStore({ dataDir: join(dataDir, 'store') });
  const leaky = inheritedDescriptors().map((n) => readlinkSync(`/proc/self/fd/${n}`));
  t.ok(leaky.some((l) => l.endsWith('store.mdb')), `the store's files are open here without close-on-exec (${leaky.join(', ')})`);
  const s = createFunctionSandbox({ processes: 1 });
  t.teardown(async () => {
    await s.close();
    await store.close();
  });
  const report = await s.start();
  if (inCI) t.equal(report.layer, 'bwrap', 'CI installs bubblewrap: the strongest layer is in use');
  t.match(await s.invoke(call('() => 1')), { ok: true }, 'a call runs');
  const pid = nodeBelow(s.pids()[0]);

  const environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
  t.notOk(environ.includes('SANDBOX_CANARY'), 'no variable of the platform’s environment');
  t.notOk(environ.includes('PATH='), 'not even PATH');
  t.equal(readlinkSync(`/proc/${pid}/cwd`), '/', 'working directory is / (never DATA_DIR)');
  const entries = readdirSync(`/proc/${pid}/fd`).map((n): [string, string] => {
    try {
      return [n, readlinkSync(`/proc/${pid}/fd/${n}`)];
    } catch {
      return [n, ''];
    }
  });
  const fds = entries.map(([, link]) => link);
  t.notOk(fds.some((l) => l.includes(dataDir)), `no descriptor into the data dir (${fd} and the store's files are open in the parent): ${fds.join(', ')}`);
  // Node hands a child its stdio as socket pairs: those three, and no other socket.
  t.notOk(entries.some(([n, l]) => l.startsWith('socket:') && !['0', '1', '2'].includes(n)), 'no socket but stdio');
  t.notOk(fds.some((l) => l.startsWith('/') && !l.startsWith('/dev/') && !l.includes('node_modules') && !l.includes('/dist/') && l !== '/'), `no regular file of the platform: ${fds.join(', ')}`);

  // bwrap started as root (where 65534 could not start it) is 65534 only inside its namespace: the report says so.
  const unprivilegedOutside = report.layer === 'unshare' || report.layer === 'uid' || (report.layer === 'bwrap' && report.missing.length === 0);
  if (unprivilegedOutside) {
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    t.equal(uid, '65534', 'an unprivileged uid');
  }
  if (report.layer === 'bwrap' || report.layer === 'unshare') {
    t.not(readlinkSync(`/proc/${pid}/ns/net`), readlinkSync('/proc/self/ns/net'), 'its own network namespace');
  }
  if (report.layer === 'bwrap') {
    const root = readdirSync(`/proc/${pid}/root`);
    t.notOk(root.includes('etc') || root.includes('root') || root.includes('home'), `a minimal root filesystem: ${root.join(' ')}`);
    const tmp = readdirSync(`/proc/${pid}/root/tmp`);
    t.notOk(tmp.includes(basename(dataDir)), `its own /tmp, not the host's: ${tmp.join(' ')}`);
    // mountinfo: id, parent, major:minor, root, mount point, options, ...
    const mounts = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').trim().split('\n').map((l) => l.split(' '));
    const rootMount = mounts.filter((m) => m[4] === '/').at(-1);
    t.ok(rootMount?.[5].split(',').includes('ro'), `its root filesystem is read-only (${rootMount?.slice(4, 6).join(' ')})`);
    for (const dir of ['/usr', '/proc/sys']) {
      const m = mounts.filter((x) => x[4] === dir).at(-1);
      if (m) t.ok(m[5].split(',').includes('ro'), `${dir} is read-only`);
    }
  }
  t.same(report.missing, report.layer === 'bwrap' ? [] : report.missing, 'what is missing is reported');
  delete process.env.SANDBOX_CANARY;
});

t.test('stack limit: at the largest allowed limit, deep recursion ends in QuickJS, not on the host stack', async (t) => {
  const s = createFunctionSandbox({ processes: 1, stackKb: MAX_STACK_KB * 4 });
  t.teardown(() => s.close());
  t.match(await s.invoke(call('() => 1')), { ok: true }, 'a process is up');
  const pid = s.pids()[0];
  const checked: Array<[string, string]> = [
    ['function recursion', 'function f() { return f() + 1 }'],
    ['recursion through arrays', '() => { const r = (n) => [r(n + 1)]; return r(0) }'],
    ['a recursive getter', '() => { const o = {}; Object.defineProperty(o, "x", { get() { return this.x } }); return o.x }'],
    ['a chain of proxies', '() => { let p = {}; for (let i = 0; i < 100000; i++) p = new Proxy(p, {}); return typeof p.x }'],
    ['JSON.parse of deep nesting', '() => JSON.parse("[".repeat(100000) + "]".repeat(100000))'],
    ['String() of deep nesting', '() => { let a = []; for (let i = 0; i < 100000; i++) a = [a]; return String(a).length }'],
    // Its cycle check is quadratic in the depth (native code that polls no interrupt): give it time to reach the limit.
    ['JSON.stringify of deep nesting', '() => { let a = []; for (let i = 0; i < 100000; i++) a = [a]; return JSON.stringify(a).length }'],
  ];
  for (const [what, source] of checked) {
    const r = await s.invoke(call(source, { timeoutMs: 30_000 }));
    t.match(r.ok ? 'ok' : `${r.error.kind}: ${r.error.message}`, /^error: .*stack overflow/, `${what}: QuickJS's own stack overflow`);
  }
  t.equal(s.pids()[0], pid, 'the process survived all of them: no host stack overflow');
  t.match(await s.invoke(call('() => 1')), { ok: true }, 'and serves the next call');
  t.throws(() => loadConfig({ FUNCTION_STACK_KB: String(MAX_STACK_KB + 1) }), 'a larger FUNCTION_STACK_KB is refused at start');
});

t.test('what QuickJS cannot stop itself is contained: the call fails, the process is replaced', async (t) => {
  const s = createFunctionSandbox({ processes: 1, timeoutMs: 300, stackKb: MAX_STACK_KB });
  t.teardown(() => s.close());
  const cases: Array<[string, string, string]> = [
    // A native loop that polls no interrupt: only the wall-clock kill ends it.
    ['JSON.stringify of deep nesting past its time limit', '() => { let a = []; for (let i = 0; i < 100000; i++) a = [a]; return JSON.stringify(a).length }', 'timeout'],
    // Parsing deeply nested source recurses natively past any QuickJS check: the host stack overflows.
    ['parsing deeply nested source', '() => eval("(".repeat(100000) + "1" + ")".repeat(100000))', 'error'],
  ];
  // The probes around each case get a long time limit: a process's cold start on a loaded machine (a CI run's
  // other test files beside it) can take longer than the 300 ms the case itself is given.
  const probe = (source: string) => s.invoke(call(source, { timeoutMs: 30_000 }));
  for (const [what, source, kind] of cases) {
    t.match(await probe('() => 1'), { ok: true }, `${what}: a process is up`);
    const pid = s.pids()[0];
    const r = await s.invoke(call(source));
    t.equal(r.ok ? 'ok' : r.error.kind, kind, `${what}: a function error (${r.ok ? '' : r.error.message})`);
    const next = await probe('() => 2');
    t.same(next.ok ? next.value : next.error, 2, `${what}: the next call is served`);
    t.not(s.pids()[0], pid, `${what}: by a fresh process (one that was interrupted from outside is not trusted again)`);
  }
});

t.test("a call that costs its process holds its project's slot until a new process is ready", async (t) => {
  // Two processes, one call at a time per project and per account: when A's call crashes its process, A's next
  // call waits for the replacement (A pays for the cold start it caused) though the other process is free;
  // B's, of another account, is not held.
  const s = createFunctionSandbox({ processes: 2, projectConcurrency: 1, timeoutMs: 30_000 });
  t.teardown(() => s.close());
  await s.start();
  const before = await eventually(async () => s.pids().length === 2 && s.pids(), 30_000, 'two ready processes');
  const crash = s.invoke(call('() => eval("(".repeat(100000) + "1" + ")".repeat(100000))', { account: 'a', project: 'A' }));
  // The ready processes as each call answers.
  const answered = (r: Promise<InvokeResult>) => r.then((result) => ({ result, pids: s.pids() }));
  const next = answered(s.invoke(call('() => 2', { account: 'a', project: 'A' })));
  const crashed = await crash;
  t.equal(crashed.ok ? 'ok' : crashed.error.kind, 'error', 'the crashing call is a function error');
  const other = await answered(s.invoke(call('() => 3', { account: 'b', project: 'B' })));
  t.same(other.result.ok && other.result.value, 3, "B's call is served");
  t.ok(other.pids.every((pid) => before.includes(pid)), 'on the free process, before the replacement is ready');
  const { result: second, pids: after } = await next;
  t.same(second.ok && second.value, 2, "A's next call is served");
  t.ok(after.some((pid) => !before.includes(pid)), `once a new process was ready (${before} before, ${after} when it answered)`);
});

t.test('a short time limit: the pool starting or replacing its process is not counted as waiting', async (t) => {
  // 25 ms allows 250 ms of waiting for a busy process; a process's cold start takes longer than that here.
  const short = (source: string) => s.invoke(call(source, { timeoutMs: 25 }));
  const s = createFunctionSandbox({ processes: 1, timeoutMs: 5000 });
  t.teardown(() => s.close());
  const first = await short('() => 1');
  t.same(first.ok ? first.value : first.error, 1, 'the first call on a cold pool is served');
  const spin = await short('() => { for (;;) {} }');
  t.equal(spin.ok ? 'ok' : spin.error.kind, 'timeout', 'a call past its limit times out (its process is replaced)');
  const next = await short('() => 2');
  t.same(next.ok ? next.value : next.error, 2, 'the call queued while the process is replaced is served by the new one');

  // Waiting for a process that is ready but busy still counts.
  const busy = s.invoke(call('() => { const end = Date.now() + 600; while (Date.now() < end) {} return 3 }'));
  await new Promise((resolve) => setTimeout(resolve, 50));
  const waited = await s.invoke(call('() => 4', { timeoutMs: 20 }));
  t.same(waited.ok ? 'ok' : waited.error, { kind: 'timeout', message: 'the function waited too long for a sandbox' }, 'a call that waited ten times its limit behind a busy process fails');
  t.same((await busy).ok, true);
});

t.test('off-heap growth and a killed process', async (t) => {
  const s = createFunctionSandbox({ processes: 1, memoryMb: 16, timeoutMs: 5000 });
  t.teardown(() => s.close());
  for (const source of ['() => { const keep = []; for (;;) keep.push(new ArrayBuffer(1 << 20)) }', '() => new Uint8Array(64 << 20).length', '() => { const keep = []; for (;;) keep.push(new Float64Array(1 << 17)) }']) {
    const r = await s.invoke(call(source));
    t.equal(r.ok ? 'ok' : r.error.kind, 'memory', `array buffers count against the memory limit: ${source}`);
  }
  t.match(await s.invoke(call('() => 1')), { ok: true }, 'a fresh process after the memory failures');
  const before = s.pids()[0];
  const spinning = s.invoke(call('() => { for (;;) {} }', { timeoutMs: 4000 }));
  await new Promise((r) => setTimeout(r, 200));
  process.kill(nodeBelow(before), 'SIGKILL');
  const r = await spinning;
  t.equal(r.ok ? 'ok' : r.error.kind, 'error', 'a process that dies mid-call makes the call a function error');
  const next = await s.invoke(call('() => 7'));
  t.same(next.ok && next.value, 7, 'a replacement process serves the next call');
  t.not(s.pids()[0], before, 'it is a new process');
});

t.test('a process past its memory ceiling is replaced after its call', async (t) => {
  const s = createFunctionSandbox({ processes: 1, memoryMb: 256, processMaxMb: 128, timeoutMs: 5000 });
  t.teardown(() => s.close());
  t.match(await s.invoke(call('() => 1')), { ok: true }, 'a process is up');
  const before = s.pids()[0];
  t.type(before, 'number', 'its pid is known');
  const r = await s.invoke(call('() => { const a = new Uint8Array(200 << 20); a.fill(1); return a.length }'));
  t.ok(r.ok, 'the call itself is within its limit');
  await new Promise((resolve) => setTimeout(resolve, 300));
  const after = await s.invoke(call('() => 1'));
  t.ok(after.ok, 'the next call runs');
  t.not(s.pids()[0], before, 'on a fresh process (WebAssembly memory does not shrink)');
});

t.test('fairness: another project is served while one has a backlog of spinning calls', async (t) => {
  for (const processes of [1, 2]) {
    // A's calls each spin for their whole limit; B has that long to finish before another of A's can.
    const s = createFunctionSandbox({ processes, timeoutMs: 600 });
    t.teardown(() => s.close());
    await s.start();
    let aDone = 0;
    const backlog = Array.from({ length: 8 }, () => s.invoke(call('() => { for (;;) {} }', { project: 'A' })).then((r) => (aDone++, r)));
    await new Promise((r) => setTimeout(r, 20));
    const b = await s.invoke(call('() => "B answered"', { project: 'B' }));
    t.same(b.ok && b.value, 'B answered', `${processes} process(es): B's call completes`);
    t.ok(aDone <= processes, `${processes} process(es): B waited for at most one round of A's calls (${aDone} done)`);
    const rest = await Promise.all(backlog);
    t.ok(rest.every((r) => !r.ok && r.error.kind === 'timeout'), 'A’s calls each hit their own limit');
  }
});

t.test('a project past its queue bound is refused, not queued', async (t) => {
  const s = createFunctionSandbox({ processes: 1, timeoutMs: 200, queuePerProject: 2 });
  t.teardown(() => s.close());
  const results = await Promise.all(Array.from({ length: 5 }, () => s.invoke(call('() => { for (;;) {} }', { project: 'A' }))));
  t.equal(results.filter((r) => !r.ok && r.error.kind === 'overloaded').length, 3, 'three calls beyond the two waiting are refused');
});

t.test('FairQueue: quota per project and per account, fewest running first, every item served once (fast-check)', async (t) => {
  // Projects a and b belong to one account, c and d to another.
  const accountOf = (project: string) => (project < 'c' ? 'x' : 'y');
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 4 }),
      fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd'), fc.constantFrom('push', 'take', 'done')), { maxLength: 200 }),
      (quota, ops) => {
        const q = new FairQueue<number>(quota, 1000);
        const running = new Map<string, number>();
        const count = (project: string, by: number) => {
          for (const key of [project, accountOf(project)]) running.set(key, (running.get(key) ?? 0) + by);
          return running.get(project)! <= quota && running.get(accountOf(project))! <= quota;
        };
        const live: string[] = [];
        let pushed = 0;
        let taken = 0;
        for (const [project, op] of ops) {
          if (op === 'push') {
            q.push(accountOf(project), project, pushed++);
          } else if (op === 'done' && live.length) {
            const p = live.shift()!;
            q.done(p);
            count(p, -1);
          } else {
            const next = q.take();
            if (next) {
              taken++;
              live.push(next.project);
              if (!count(next.project, 1)) return false;
            }
          }
        }
        for (let next = q.take(); next; next = q.take()) {
          taken++;
          if (!count(next.project, 1)) return false;
        }
        // Whatever is left waits only because its project is at its quota.
        return taken + q.length === pushed;
      },
    ),
  );
  const q = new FairQueue<string>(4, 100);
  for (let i = 0; i < 5; i++) q.push('acme', 'busy', `busy${i}`);
  q.take();
  q.take();
  q.push('acme', 'quiet', 'quiet0');
  t.equal(q.take()?.project, 'quiet', 'the project with fewer calls running goes first');

  // One account spinning in many projects holds at most the quota: another account's call is next.
  const spread = new FairQueue<string>(2, 100);
  for (let i = 0; i < 16; i++) spread.push('mallory', `m${i}`, `spin${i}`);
  t.match(spread.take(), { project: 'm0' });
  t.match(spread.take(), { project: 'm1' });
  t.equal(spread.take(), null, "the account is at its quota, whatever its projects' own counts");
  spread.push('victim', 'v', 'turn');
  t.match(spread.take(), { project: 'v', item: 'turn' }, "another account's call runs at once");
  spread.done('m0');
  t.match(spread.take(), { project: 'm2' }, 'a freed place goes back to the account, to its least recently served project');
});

t.test("a call reads no memory an earlier call freed, whatever buffer it grows (another tenant's data)", async (t) => {
  // One process, so the second call runs in the WebAssembly memory the first freed.
  const s = createFunctionSandbox({ processes: 1, timeoutMs: 5000 });
  t.teardown(() => s.close());
  await s.start();
  const secret = `SECRET${randomBytes(6).toString('hex')}`;
  const spray = `function f() { const keep = []; for (let i = 0; i < 20000; i++) keep.push('${secret}-' + i + '-' + 'S'.repeat(20)); return keep.length; }`;
  t.match(await s.invoke(call(spray, { project: 'victim', account: 'a1' })), { ok: true, value: 20000 }, "the first tenant's call fills memory");
  const probe = String.raw`function f() {
    const seen = (buffer) => {
      const u = new Uint8Array(buffer);
      let n = 0;
      for (let i = 0; i < u.length; i += 8192) n += (String.fromCharCode.apply(null, u.subarray(i, i + 8192)).match(/SECRET/g) || []).length;
      return n;
    };
    const r = {};
    const tryIt = (name, make) => { try { r[name] = seen(make()); } catch (e) { r[name] = 'refused: ' + e.message; } };
    const M = 1 << 20;
    tryIt('SharedArrayBuffer grown', () => { const b = new SharedArrayBuffer(8, { maxByteLength: M }); b.grow(M); return b; });
    tryIt('ArrayBuffer resized', () => { const b = new ArrayBuffer(8, { maxByteLength: M }); b.resize(M); return b; });
    tryIt('ArrayBuffer shrunk and grown', () => { const b = new ArrayBuffer(M, { maxByteLength: M }); b.resize(8); b.resize(M); return b; });
    tryIt('ArrayBuffer transferred longer', () => new ArrayBuffer(8).transfer(M));
    tryIt('ArrayBuffer transferred to a fixed length', () => new ArrayBuffer(8, { maxByteLength: M }).transferToFixedLength(M));
    tryIt('ArrayBuffer', () => new ArrayBuffer(M));
    tryIt('Float64Array', () => new Float64Array(M / 8).buffer);
    return JSON.stringify(r);
  }`;
  const read = await s.invoke(call(probe, { project: 'attacker', account: 'a2' }));
  t.equal(read.ok, true, 'the probe ran');
  const found = JSON.parse(read.ok ? (read.value as string) : '{}') as Record<string, number | string>;
  for (const [how, n] of Object.entries(found)) t.ok(n === 0 || String(n).startsWith('refused'), `${how}: ${n}`);
  t.match(found['SharedArrayBuffer grown'], /^refused/, 'no SharedArrayBuffer');
});
