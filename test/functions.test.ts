import t, { type Test } from 'tap';
import fc from 'fast-check';
import { createFunctionSandbox, type ConvInput, type InvokeRequest, type InvokeResult } from '../actors/functions/mod.js';

const conv = (over: Partial<ConvInput> = {}): ConvInput => ({
  conversation_id: 'c-1',
  channel: 'chat',
  environment: 'production',
  variant: { id: 'v1', name: 'Variant A' },
  state: {},
  integration_attributes: { crm_id: 'crm-7', tier: 'gold' },
  metadata: { page: '/pricing' },
  sip_headers: { 'X-Caller-Id': '+15551234', 'P-Asserted-Identity': 'sip:alice@example.com' },
  variables: { greeting: 'Hello', limits: { max: 3 } },
  ...over,
});

const call = (name: string, source: string, extra: Partial<InvokeRequest> = {}): InvokeRequest => ({
  functions: { [name]: source },
  name,
  conv: conv(),
  args: [],
  ...extra,
});

function expectOk(t: Test, r: InvokeResult, what: string): Extract<InvokeResult, { ok: true }> {
  if (!r.ok) t.fail(`${what}: expected ok, got ${r.error.kind}: ${r.error.message}`);
  else t.pass(what);
  return r as Extract<InvokeResult, { ok: true }>;
}

function expectFail(t: Test, r: InvokeResult, kind: string, what: string): Extract<InvokeResult, { ok: false }> {
  if (r.ok) t.fail(`${what}: expected ${kind}, got ok with ${JSON.stringify(r.value)}`);
  else t.equal(r.error.kind, kind, `${what}: ${r.error.message}`);
  return r as Extract<InvokeResult, { ok: false }>;
}

// A "normal" call used after every failure to show the pool still works.
const ping = call('ping', '(conv, n) => n + 1', { args: [41] });

const sandbox = createFunctionSandbox({ processes: 2, timeoutMs: 2000 });
t.teardown(() => sandbox.close());

t.test('state carries across calls: start, then turns fed with the returned state', async (t) => {
  const functions = {
    start: `function start(conv) { conv.state.visits = (conv.state.visits ?? 0) + 1; conv.state.history = []; conv.say('Welcome'); }`,
    turn: `function turn(conv, message) {
      conv.state.history.push(message);
      conv.state.visits += 1;
      if (message.includes('balance')) return 'Your balance is ' + conv.state.history.length;
    }`,
  };
  const first = expectOk(t, await sandbox.invoke({ functions, name: 'start', conv: conv({ state: { visits: 4 } }), args: [] }), 'start');
  t.same(first.conv.state, { visits: 5, history: [] });
  t.same(first.conv.said, ['Welcome']);
  t.equal(first.value, undefined);

  const second = expectOk(t, await sandbox.invoke({ functions, name: 'turn', conv: conv({ state: first.conv.state }), args: ['hi'] }), 'turn 1');
  t.same(second.conv.state, { visits: 6, history: ['hi'] });
  t.equal(second.value, undefined);

  const third = expectOk(t, await sandbox.invoke({ functions, name: 'turn', conv: conv({ state: second.conv.state }), args: ['my balance?'] }), 'turn 2');
  t.same(third.conv.state, { visits: 7, history: ['hi', 'my balance?'] });
  t.equal(third.value, 'Your balance is 2', 'a string returned by turn comes back as the value');
  t.ok(third.durationMs >= 0, 'durationMs is measured');
});

t.test('the caller’s state object is not mutated', async (t) => {
  const state = { n: 1, nested: { a: 1 } };
  const r = expectOk(t, await sandbox.invoke(call('f', 'function f(conv) { conv.state.n = 2; conv.state.nested.a = 2; }', { conv: conv({ state }) })), 'call');
  t.same(r.conv.state, { n: 2, nested: { a: 2 } });
  t.same(state, { n: 1, nested: { a: 1 } });
});

t.test('conv fields are visible', async (t) => {
  const source = `function look(conv) {
    return {
      id: conv.conversation_id, channel: conv.channel, environment: conv.environment, variant: conv.variant,
      crm: conv.integration_attributes.crm_id, page: conv.metadata.page, greeting: conv.variables.greeting,
      max: conv.variables.limits.max,
      caller: conv.sip_headers.get('x-caller-id'), pai: conv.sip_headers.get('P-ASSERTED-IDENTITY'),
      missing: conv.sip_headers.get('X-Nope'), own: conv.sip_headers['X-Caller-Id'],
      keys: Object.keys(conv).sort(),
    };
  }`;
  const r = expectOk(t, await sandbox.invoke(call('look', source)), 'look');
  t.same(r.value, {
    id: 'c-1',
    channel: 'chat',
    environment: 'production',
    variant: { id: 'v1', name: 'Variant A' },
    crm: 'crm-7',
    page: '/pricing',
    greeting: 'Hello',
    max: 3,
    caller: '+15551234',
    pai: 'sip:alice@example.com',
    missing: null,
    own: '+15551234',
    keys: ['channel', 'conversation_id', 'environment', 'integration_attributes', 'metadata', 'sip_headers', 'state', 'variables', 'variant'],
  });
});

t.test('say, handoff and end are collected', async (t) => {
  const r = expectOk(
    t,
    await sandbox.invoke(call('f', `function f(conv) { conv.say('one'); conv.say(2); conv.handoff('sales', 'wants a quote'); conv.end(); return 'bye'; }`)),
    'call',
  );
  t.same(r.conv.said, ['one', '2']);
  t.same(r.conv.handoff, { destination: 'sales', reason: 'wants a quote' });
  t.equal(r.conv.ended, true);
  t.equal(r.value, 'bye');

  const quiet = expectOk(t, await sandbox.invoke(call('g', 'function g() {}')), 'nothing done');
  t.same(quiet.conv, { state: {}, said: [], handoff: null, ended: false, awaiting: null, pii: [] });
});

t.test('await_external_event is recorded as an effect, never a host call', async (t) => {
  const r = expectOk(t, await sandbox.invoke(call('f', `function f(conv) { conv.await_external_event('pay-1'); conv.await_external_event(42, { timeout_ms: 1500 }); return typeof conv.await_external_event; }`)), 'call');
  t.same(r.conv.awaiting, { event_id: '42', timeout_ms: 1500 }, 'the last call wins; the id as a string');
  t.equal(r.value, 'function');
  const odd = expectOk(t, await sandbox.invoke(call('g', `function g(conv) { conv.await_external_event('x', { timeout_ms: 'soon' }); }`)), 'odd timeout');
  t.same(odd.conv.awaiting, { event_id: 'x', timeout_ms: null }, 'a timeout that is not a number means the default');
  const hostile = expectOk(t, await sandbox.invoke(call('h', `function h(conv) { conv.await_external_event('y', { get timeout_ms() { throw new Error('no'); } }); }`)), 'throwing getter');
  t.same(hostile.conv.awaiting, { event_id: 'y', timeout_ms: null });
});

t.test('mark_pii is recorded as an effect, bounded, never a host call', async (t) => {
  const r = expectOk(t, await sandbox.invoke(call('f', `function f(conv) { conv.mark_pii('4111 1111'); conv.mark_pii(42); return typeof conv.mark_pii; }`)), 'call');
  t.same(r.conv.pii, ['4111 1111', '42'], 'the values, as strings, in order');
  t.equal(r.value, 'function');
  const empty = await sandbox.invoke(call('g', `function g(conv) { conv.mark_pii(''); }`));
  t.equal(empty.ok, false, 'an empty value is refused: the function throws');
  const many = await sandbox.invoke(call('h', `function h(conv) { for (let i = 0; i < 40; i++) conv.mark_pii('v' + i); }`));
  t.equal(many.ok, false, 'past 32 values a call: refused');
  t.ok(many.conv.pii.length <= 32, 'and never more than 32 cross');
});

t.test('tool arguments and return values', async (t) => {
  const r = expectOk(t, await sandbox.invoke(call('lookup', '(conv, args, missing) => ({ sum: args.a + args.b, missing: missing === undefined })', { args: [{ a: 2, b: 3 }, undefined] })), 'tool');
  t.same(r.value, { sum: 5, missing: true });

  // Values cross the sandbox boundary as JSON data: a Date is its ISO string, a Map has no JSON fields.
  const date = expectOk(t, await sandbox.invoke(call('d', '() => ({ when: new Date(0), tags: new Map([["a", 1]]) })')), 'JSON data');
  t.same(date.value, { when: '1970-01-01T00:00:00.000Z', tags: {} });

  const fn = expectOk(t, await sandbox.invoke(call('h', '() => function inner() { return 1 }')), 'not JSON');
  t.equal(typeof fn.value, 'string', 'a function comes back as its String()');
  t.match(fn.value, /inner/);

  const weird = expectOk(t, await sandbox.invoke(call('w', '() => ({ toString() { return "custom" }, f() {}, n: 1n })')), 'not JSON: a BigInt');
  t.equal(weird.value, 'custom', 'a value JSON cannot hold comes back as its String()');

  const st = expectOk(t, await sandbox.invoke(call('s', '(conv) => { conv.state.f = () => 1; conv.state.keep = "yes"; conv.state.u = undefined; }')), 'state with functions');
  t.same(st.conv.state, { keep: 'yes' }, 'functions and undefined are dropped from the state');

  const big = expectOk(t, await sandbox.invoke(call('b', '(conv) => { conv.state.y = 7; conv.state.big = 10n; }')), 'state with a BigInt');
  t.same(big.conv.state, { y: 7, big: '10' }, 'a BigInt in the state is its String(), and the rest is kept');

  // A state JSON cannot write at all: the call is an error that changes nothing, not a silent loss of its state.
  const cycle = await sandbox.invoke(call('c', '(conv) => { conv.state.z = 5; const c = { v: 2 }; c.self = c; conv.state.c = c; conv.say("cycle set"); return "ok"; }'));
  t.equal(cycle.ok, false, 'a cyclic state: a function error');
  t.match(!cycle.ok && cycle.error, { kind: 'error', message: /^conv\.state cannot be written as JSON: .*circular|cycle/i });
  t.same(cycle.conv.said, [], 'nothing it said is taken');
  t.notOk('z' in cycle.conv.state, 'nor its state: the state as it was');
  const getter = await sandbox.invoke(call('g', '(conv) => { conv.state.z = 5; conv.state.bad = { toJSON() { throw new Error("no JSON for you"); } }; }'));
  t.match(!getter.ok && getter.error, { kind: 'error', message: 'conv.state cannot be written as JSON: no JSON for you' }, 'a throwing toJSON: the same');
  for (const replaced of ['conv.state = null', 'conv.state = [1, 2]', 'conv.state = 5', 'conv.state.toJSON = () => 5', 'delete conv.state']) {
    const r = await sandbox.invoke(call('n', `(conv) => { conv.state.plain = 'set'; ${replaced}; return 'ok'; }`));
    t.match(!r.ok && r.error, { kind: 'error', message: 'conv.state cannot be written as JSON: conv.state must be an object of variables' }, `${replaced}: a function error`);
    t.notOk('plain' in r.conv.state, `${replaced}: nothing of the call's state taken`);
  }
});

t.test('async functions', async (t) => {
  const r = expectOk(
    t,
    await sandbox.invoke(
      call('turn', `async (conv, msg) => { await null; const x = await Promise.resolve(21); conv.state.seen = msg; conv.say('thinking'); return x * 2; }`, { args: ['hey'] }),
    ),
    'async',
  );
  t.equal(r.value, 42);
  t.same(r.conv.state, { seen: 'hey' });
  t.same(r.conv.said, ['thinking']);

  const thenable = expectOk(t, await sandbox.invoke(call('f', '() => ({ then(resolve) { resolve("via then") } })')), 'thenable');
  t.equal(thenable.value, 'via then');
});

t.test('a throwing function is an error, with its effects so far, and the pool still works', async (t) => {
  const r = expectFail(t, await sandbox.invoke(call('f', `function f(conv) { conv.state.before = true; conv.say('partial'); throw new Error('boom: no account'); }`)), 'error', 'throw');
  t.match(r.error.message, /boom: no account/);
  t.same(r.conv.state, { before: true }, 'state after an error is returned');
  t.same(r.conv.said, ['partial']);

  const rejected = expectFail(t, await sandbox.invoke(call('f', `async () => { await null; throw new TypeError('bad type') }`)), 'error', 'rejection');
  t.match(rejected.error.message, /bad type/);

  const str = expectFail(t, await sandbox.invoke(call('f', `() => { throw 'plain string' }`)), 'error', 'throw a string');
  t.equal(str.error.message, 'plain string');

  const deep = expectFail(t, await sandbox.invoke(call('f', `function f() { return f() + 1 }`)), 'error', 'stack overflow');
  t.match(deep.error.message, /stack/i);

  expectOk(t, await sandbox.invoke(ping), 'pool still works');
});

t.test('state or a value nested past the platform\'s JSON depth is a function error; the state stays as it was', async (t) => {
  const nest = (levels: number, what: string) => `let a = 1; for (let i = 0; i < ${levels}; i++) a = [a]; ${what}`;
  const input = conv({ state: { kept: true } });
  const deepState = expectFail(t, await sandbox.invoke(call('f', `function f(conv) { ${nest(1500, 'conv.state.deep = a;')} conv.say('x'); }`, { conv: input })), 'error', 'deep state');
  t.match(deepState.error.message, /nests deeper than 64 levels/);
  t.same(deepState.conv.state, { kept: true }, 'the state as it was');
  t.same(deepState.conv.said, [], 'nothing said');
  const deepValue = expectFail(t, await sandbox.invoke(call('f', `function f() { ${nest(200, 'return a;')} }`)), 'error', 'deep value');
  t.match(deepValue.error.message, /nests deeper than 64 levels/);
  const fine = expectOk(t, await sandbox.invoke(call('f', `function f(conv) { ${nest(60, 'conv.state.nested = a;')} }`, { conv: input })), 'state nested 60 levels');
  t.equal(JSON.stringify(fine.conv.state).split('[').length - 1, 60);
});

t.test('timeouts: synchronous loops, async loops, pending promises', async (t) => {
  const cases: Array<[string, string]> = [
    ['infinite synchronous loop', 'function f() { while (true) {} }'],
    ['loop while compiling', '(() => { for (;;) {} })()'],
    ['infinite async loop', 'async function f() { await null; while (true) {} }'],
    ['infinite microtask chain', 'async function f() { for (;;) await null }'],
    ['never-resolving promise', '() => new Promise(() => {})'],
    ['getter loop on the return value', '() => ({ get x() { for (;;) {} } })'],
    ['a regular expression with catastrophic backtracking', '() => /(a+)+$/.test("a".repeat(40) + "b")'],
  ];
  for (const [what, source] of cases) {
    const r = expectFail(t, await sandbox.invoke(call('f', source, { conv: conv({ state: { keep: 1 } }), timeoutMs: 150 })), 'timeout', what);
    t.same(r.conv, { state: { keep: 1 }, said: [], handoff: null, ended: false, awaiting: null, pii: [] }, `${what}: input state unchanged, no effects`);
    expectOk(t, await sandbox.invoke(ping), `${what}: a normal call succeeds afterwards`);
  }
});

t.test('the time limit is CPU time: a call slowed down by another tenant\'s loops in the processes beside it still finishes', async (t) => {
  // More sandbox processes than cores, all but one spinning: the one left gets a fraction of a core. Its limit is
  // its own CPU time, so it finishes; a wall-clock limit would fail it for the others' work.
  const pool = createFunctionSandbox({ processes: 8, timeoutMs: 1000 });
  t.teardown(() => pool.close());
  const work = (n: number) => `function f() { let x = 0; for (let i = 0; i < ${n}; i++) x += Math.sqrt(i); return 'done ' + (x > 0); }`;
  // The loop sized to take 60 % of the limit alone (measured here, on an idle pool): slowed down much, it runs past
  // the limit in wall-clock time, not in CPU time.
  await pool.start();
  expectOk(t, await pool.invoke(call('f', work(1e5))), 'warm');
  const probe = expectOk(t, await pool.invoke(call('f', work(2e6))), 'probe');
  const n = Math.max(1e5, Math.round((2e6 * 600) / Math.max(1, probe.durationMs)));
  // Seven calls spin, each replaced by another as soon as it is stopped, until the measured call is done.
  let spin = true;
  const stopped: string[] = [];
  const spinner = async (): Promise<void> => {
    while (spin) {
      const r = await pool.invoke(call('f', 'function f() { for (;;) {} }', { project: 'mallory', account: 'mallory' }));
      stopped.push(r.ok ? 'ok' : r.error.kind);
    }
  };
  const spinners = Array.from({ length: 7 }, spinner);
  // Until the pool's processes have all started and every spinner holds one.
  await new Promise((r) => setTimeout(r, 2500));
  const victim = expectOk(t, await pool.invoke(call('f', work(n), { project: 'victim', account: 'victim' })), 'the slowed call finished within its CPU time');
  spin = false;
  t.equal(victim.value, 'done true');
  t.comment(`alone ${Math.round((probe.durationMs * n) / 2e6)} ms, beside the spinning calls ${Math.round(victim.durationMs)} ms`);
  await Promise.all(spinners);
  t.ok(stopped.length >= 7 && stopped.every((k) => k === 'timeout'), `each spinning call was stopped at its own limit (${stopped.join(', ')})`);
});

t.test('a memory bomb kills only its worker', async (t) => {
  const small = createFunctionSandbox({ processes: 1, memoryMb: 16, timeoutMs: 20000 });
  t.teardown(() => small.close());
  const bombs = [
    'function f() { const a = []; for (;;) a.push(new Array(100000).fill(1.5)); }',
    'async function f() { await null; let s = "x"; const keep = []; for (;;) { keep.push(s + keep.length); s = s + s.slice(0, 1000); } }',
  ];
  for (const source of bombs) {
    const r = expectFail(t, await small.invoke(call('f', source, { conv: conv({ state: { keep: 1 } }) })), 'memory', 'memory bomb');
    t.same(r.conv, { state: { keep: 1 }, said: [], handoff: null, ended: false, awaiting: null, pii: [] }, 'input state unchanged');
    const after = expectOk(t, await small.invoke(ping), 'a normal call succeeds afterwards');
    t.equal(after.value, 42);
  }
});

t.test('no way out of the sandbox', async (t) => {
  (globalThis as Record<string, unknown>).PARENT_SECRET = 'hunter2';
  t.teardown(() => void delete (globalThis as Record<string, unknown>).PARENT_SECRET);
  const probe = expectOk(
    t,
    await sandbox.invoke(
      call(
        'probe',
        `function probe() {
          return {
            process: typeof process, require: typeof require, gp: typeof globalThis.process, secret: typeof PARENT_SECRET,
            gsecret: typeof globalThis.PARENT_SECRET, setTimeout: typeof setTimeout, setImmediate: typeof setImmediate,
            queueMicrotask: typeof queueMicrotask, Buffer: typeof Buffer, fetch: typeof fetch, module: typeof module,
            WebAssembly: typeof WebAssembly, FinalizationRegistry: typeof FinalizationRegistry, Atomics: typeof Atomics, std: typeof std, os: typeof os,
            console: typeof console.log, json: JSON.stringify({ a: [1] }), math: Math.max(1, 2), date: typeof Date.now(),
          };
        }`,
      ),
    ),
    'probe',
  );
  t.same(probe.value, {
    process: 'undefined',
    require: 'undefined',
    gp: 'undefined',
    secret: 'undefined',
    gsecret: 'undefined',
    setTimeout: 'undefined',
    setImmediate: 'undefined',
    queueMicrotask: 'undefined',
    Buffer: 'undefined',
    fetch: 'undefined',
    module: 'undefined',
    WebAssembly: 'undefined',
    FinalizationRegistry: 'undefined',
    Atomics: 'undefined',
    std: 'undefined',
    os: 'undefined',
    console: 'function',
    json: '{"a":[1]}',
    math: 2,
    date: 'number',
  });

  // Classic escapes. Tenant code runs in QuickJS: eval and Function work, but only ever see QuickJS's own realm,
  // and a stack trace names only the sandbox's frames (V8's prepareStackTrace hook does not exist there).
  const onlySandboxFrames = (v: unknown) => typeof v === 'string' && !/node:|\/dist\/|file:|wasm/.test(v);
  const escapes: Array<[string, string, (r: InvokeResult) => boolean]> = [
    ['constructor of a global', `() => this.constructor.constructor('return process')()`, (r) => !r.ok && /process/.test(r.error.message)],
    ['constructor of conv.say', `(conv) => conv.say.constructor('return process')()`, (r) => !r.ok && /process/.test(r.error.message)],
    ['constructor of sip_headers.get', `(conv) => conv.sip_headers.get.constructor.constructor('return process')()`, (r) => !r.ok && /process/.test(r.error.message)],
    ['eval', `() => eval('typeof process + typeof require + typeof globalThis.os')`, (r) => r.ok && r.value === 'undefinedundefinedundefined'],
    ['Function', `() => new Function('return typeof globalThis.process')()`, (r) => r.ok && r.value === 'undefined'],
    ['import()', `async () => { await import('node:fs') }`, (r) => !r.ok && r.error.kind === 'error'],
    ['import() of a std module', `async () => { const os = await import('os'); return typeof os.exec }`, (r) => !r.ok && r.error.kind === 'error'],
    ['error of a stack overflow', `() => { try { (function r() { r() })() } catch (e) { return e.constructor.constructor('return typeof process')() } }`, (r) => r.ok && r.value === 'undefined'],
    ['prepareStackTrace', `() => { Error.prepareStackTrace = () => globalThis; return new Error('x').stack }`, (r) => r.ok && onlySandboxFrames(r.value)],
    ['stack seen from a getter run while reading the value', `() => ({ get x() { return new Error().stack } })`, (r) => r.ok && onlySandboxFrames((r.value as { x: unknown }).x)],
    ['stack seen from toJSON of the state', `(conv) => { conv.state.s = { toJSON() { return new Error().stack } }; return 1 }`, (r) => r.ok && onlySandboxFrames(r.conv.state.s)],
    ['arguments.callee.caller', `function f() { return typeof arguments.callee.caller?.constructor?.('return process')() }`, (r) => !r.ok || r.value === 'undefined'],
    ['this in a sloppy function', `function f() { return this === globalThis && this instanceof Object }`, (r) => r.ok && r.value === true],
  ];
  for (const [what, source, safe] of escapes) {
    const r = await sandbox.invoke(call('f', source));
    t.ok(safe(r), `${what}: ${JSON.stringify(r.ok ? r.value : r.error)}`);
  }
});

t.test('one call’s globals are invisible to the next', async (t) => {
  expectOk(t, await sandbox.invoke(call('a', '() => { globalThis.leak = 1; Object.prototype.polluted = true; JSON.parse = () => "hijacked"; }')), 'pollute');
  for (let i = 0; i < 3; i++) {
    const r = expectOk(t, await sandbox.invoke(call('b', '() => [typeof leak, ({}).polluted, JSON.parse("1")]')), `read ${i}`);
    t.same(r.value, ['undefined', undefined, 1]);
  }
});

t.test('tampering with intrinsics does not corrupt the result', async (t) => {
  const r = expectOk(
    t,
    await sandbox.invoke(call('f', `(conv) => { conv.say('hi'); Array.prototype.toJSON = () => 'x'; String.prototype.toJSON = () => 1; JSON.stringify = () => '{}'; conv.state.a = 1; return 'ok'; }`)),
    'tamper',
  );
  t.same(r.conv.said, ['hi']);
  t.same(r.conv.handoff, null);
  t.same(r.conv.state, { a: 1 }, 'the state as the function set it');
  // Every object's toJSON made to give a number: the state has no JSON form but 5, so the call is an error that
  // changes nothing, and what crosses is still the envelope the host expects.
  const all = await sandbox.invoke(call('g', `(conv) => { conv.say('hi'); Object.prototype.toJSON = function () { return 5 }; conv.state.a = 1; return 'ok'; }`));
  t.match(!all.ok && all.error, { kind: 'error', message: /^conv\.state cannot be written as JSON/ });
  t.same([all.conv.said, all.conv.handoff, all.conv.state], [[], null, {}], 'nothing of it taken');
});

t.test('compile errors and unknown names', async (t) => {
  const cases: Array<[string, string]> = [
    ['syntax error', 'function start(conv) { return ; ; }}'],
    ['not a function', '42'],
    ['empty', ''],
    ['statement', 'let x = 1'],
    ['throws while evaluating', '(() => { throw new Error("at load") })()'],
    ['two functions', 'function a() {} function b() {}'],
  ];
  for (const [what, source] of cases) {
    const r = expectFail(t, await sandbox.invoke(call('f', source, { conv: conv({ state: { keep: 1 } }) })), 'compile', what);
    t.same(r.conv.state, { keep: 1 });
  }
  expectOk(t, await sandbox.invoke(call('f', 'function f() { return 1 };  ')), 'a trailing semicolon is fine');
  expectOk(t, await sandbox.invoke(call('f', 'x => x // a trailing comment')), 'a trailing comment is fine');

  const missing = expectFail(t, await sandbox.invoke({ functions: { start: 'function start() {}' }, name: 'turn', conv: conv(), args: [] }), 'not_found', 'not found');
  t.match(missing.error.message, /turn/);
  expectFail(t, await sandbox.invoke({ functions: {}, name: 'toString', conv: conv(), args: [] }), 'not_found', 'inherited name');
});

t.test('concurrent calls beyond the pool size all complete', async (t) => {
  const small = createFunctionSandbox({ processes: 2, timeoutMs: 5000 });
  t.teardown(() => small.close());
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      small.invoke(call('f', 'async (conv, i) => { await null; conv.state.i = i; return i * i }', { args: [i], conv: conv({ state: { n: i } }) })),
    ),
  );
  results.forEach((r, i) => {
    const ok = expectOk(t, r, `call ${i}`);
    t.equal(ok.value, i * i);
    t.same(ok.conv.state, { n: i, i });
  });
  // A mixture with failures does not wedge the queue.
  const mixed = await Promise.all([
    small.invoke(call('f', 'function f() { for (;;) {} }', { timeoutMs: 100 })),
    small.invoke(call('f', 'function f() { for (;;) {} }', { timeoutMs: 100 })),
    small.invoke(ping),
    small.invoke(call('f', '() => { throw new Error("x") }')),
    small.invoke(ping),
  ]);
  t.same(
    mixed.map((r) => (r.ok ? 'ok' : r.error.kind)),
    ['timeout', 'timeout', 'ok', 'error', 'ok'],
  );
});

t.test('fast-check: the output limits are bytes of UTF-8, whatever the characters', async (t) => {
  // docs/sandbox.md §5: the return value at most 64 KiB, the conversation output (the state with what was said, as
  // JSON) at most 256 KiB. A unit of one to eight characters (ASCII, accented, CJK, emoji: one to four bytes each)
  // repeated to within a few bytes of a limit, either side.
  const VALUE_BYTES = 64 * 1024;
  const OUTPUT_BYTES = 256 * 1024;
  const json = (v: unknown) => Buffer.byteLength(JSON.stringify(v));
  const unit = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 8 });
  const near = (limit: number) => fc.tuple(unit, fc.integer({ min: -48, max: 48 })).map(([u, delta]) => {
    const each = json(u) - 2;
    return { u, n: Math.max(1, Math.round((limit + delta - 2) / each)) };
  });
  await fc.assert(
    fc.asyncProperty(near(VALUE_BYTES), async ({ u, n }) => {
      const r = await sandbox.invoke(call('f', '(conv, u, n) => u.repeat(n)', { args: [u, n] }));
      const over = json(u.repeat(n)) > VALUE_BYTES;
      return over ? !r.ok && r.error.kind === 'error' && /too large/.test(r.error.message) : r.ok && r.value === u.repeat(n);
    }),
    { numRuns: 40 },
  );
  await fc.assert(
    fc.asyncProperty(near(OUTPUT_BYTES), async ({ u, n }) => {
      const r = await sandbox.invoke(call('f', '(conv, u, n) => { conv.state.s = u.repeat(n); }', { args: [u, n] }));
      // The output holds the state and more (what was said, the handoff): a state over the limit alone is refused,
      // and an accepted one is within it.
      if (json({ s: u.repeat(n) }) > OUTPUT_BYTES) return !r.ok && /too large/.test(r.error.message) && r.conv.state.s === undefined;
      return !r.ok || json(r.conv.state) <= OUTPUT_BYTES;
    }),
    { numRuns: 40 },
  );
  expectOk(t, await sandbox.invoke(ping), 'still works');
});

t.test('close', async (t) => {
  const s = createFunctionSandbox({ processes: 1 });
  expectOk(t, await s.invoke(ping), 'before close');
  const pending = s.invoke(call('f', '() => { for (;;) {} }', { timeoutMs: 10000 }));
  const queued = s.invoke(ping);
  await new Promise((r) => setTimeout(r, 50));
  await s.close();
  const [a, b] = await Promise.all([pending, queued]);
  t.equal(a.ok, false, 'a running call is failed by close');
  t.equal(b.ok, false, 'a queued call is failed by close');
  await t.rejects(s.invoke(ping), /closed/, 'invoke after close rejects');
});

t.test('fast-check: arbitrary sources never crash the parent', async (t) => {
  const fuzz = createFunctionSandbox({ processes: 2, timeoutMs: 300 });
  t.teardown(() => fuzz.close());
  const fragments = fc.constantFrom(
    'function', 'async', 'f', '(', ')', '{', '}', '=>', 'conv', ',', 'msg', 'return', 'await', 'throw', 'new', 'Error',
    '.', 'say', 'state', '=', '1', "'x'", ';', '[', ']', 'null', 'undefined', 'Promise', 'this', 'constructor', '+', ' ',
    'import', 'globalThis', 'process', 'handoff', 'end', '?', ':', '*', 'Symbol', '()', '`', '/', '\n',
  );
  const sources = fc.oneof(
    fc.string({ maxLength: 60 }),
    fc.array(fragments, { maxLength: 24 }).map((parts) => parts.join(' ')),
    fc.array(fragments, { maxLength: 20 }).map((parts) => `function f(conv, msg) { ${parts.join(' ')} }`),
    fc.array(fragments, { maxLength: 20 }).map((parts) => `async (conv, msg) => ${parts.join(' ')}`),
  );
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(sources, fc.anything({ maxDepth: 2 }), async (source, arg) => {
      runs++;
      const r = await fuzz.invoke(call('f', source, { args: [arg] }));
      if (typeof r.ok !== 'boolean' || typeof r.durationMs !== 'number') return false;
      if (!Array.isArray(r.conv.said) || typeof r.conv.state !== 'object') return false;
      if (!r.ok && !['error', 'timeout', 'memory', 'compile', 'not_found'].includes(r.error.kind)) return false;
      return true;
    }),
    { numRuns: 150 },
  );
  t.equal(runs >= 150, true, `${runs} sources tried`);
  expectOk(t, await fuzz.invoke(ping), 'still works after fuzzing');
});
