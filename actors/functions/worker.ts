/**
 * Worker thread of the function sandbox (see `sandbox.ts`). Serves one call at a time; every call runs in a
 * fresh `vm` context, so calls never see each other's globals.
 *
 * Isolation rules this file keeps (the worker realm has `process`, `require` and friends, so reaching any
 * object of this realm would let tenant code escape):
 *  - Nothing of this realm is handed to tenant code: data enters the context as JSON *strings* (primitives) and
 *    is parsed by trusted code running inside the context; `conv` and its methods are created in the context.
 *  - We never `await` or `.then` a context value from here (a tenant `then` would receive our resolvers):
 *    the in-context runner awaits, and we poll its status (a primitive).
 *  - `import()` would reject with an error of this realm, so scripts get an `importModuleDynamically` hook that
 *    throws an error made in the context (needs `--experimental-vm-modules` in the worker's execArgv).
 *  - String code generation and WebAssembly are disabled; sources of deferred work (`Atomics.waitAsync`,
 *    `FinalizationRegistry`, `WebAssembly`) are removed, so nothing of a call can run after it has ended.
 */
import { parentPort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import vm from 'node:vm';
import type { ConvOutput, FunctionErrorKind } from './types.js';
import type { WorkerCall, WorkerMessage } from './worker-protocol.js';

/** Runs first in every fresh context, before any tenant code: captures intrinsics and builds the controller. */
const BOOTSTRAP = new vm.Script(
  String.raw`(function (callKey) {
  'use strict';
  const G = globalThis;
  const parse = JSON.parse, stringify = JSON.stringify, S = String;
  const defineProperty = Object.defineProperty, freeze = Object.freeze, keys = Object.keys, isArray = Array.isArray;
  const apply = Reflect.apply, lower = String.prototype.toLowerCase;
  const hidden = (o, k, v) => defineProperty(o, k, { value: v, writable: true, configurable: true, enumerable: false });
  delete G.FinalizationRegistry;
  delete G.WebAssembly;
  if (G.Atomics) delete G.Atomics.waitAsync;
  const noop = function () {};
  hidden(G, 'console', { log: noop, info: noop, warn: noop, error: noop, debug: noop, trace: noop });

  let fn, conv, args = [], status = 'idle', value, message = '', inputState = '{}';
  const said = [];
  let handoff = null, ended = false;
  const isObject = (v) => v !== null && typeof v === 'object' && !isArray(v);
  const describe = (e) => {
    try {
      if (e !== null && (typeof e === 'object' || typeof e === 'function') && typeof e.message === 'string') {
        const name = typeof e.name === 'string' ? e.name : '';
        return name && name !== 'Error' ? name + ': ' + e.message : e.message;
      }
      return S(e);
    } catch (_) {
      return 'unprintable error';
    }
  };
  function go() {
    delete G[callKey];
    status = 'pending';
    const all = [conv];
    for (let i = 0; i < args.length; i++) all[i + 1] = args[i];
    (async function () {
      try {
        value = await apply(fn, undefined, all);
        status = 'ok';
      } catch (e) {
        message = describe(e);
        status = 'error';
      }
    })();
  }
  return freeze({
    init(convJson, argsJson) {
      const input = parse(convJson);
      const obj = (v) => (isObject(v) ? v : {});
      const state = obj(input.state);
      inputState = stringify(state);
      const headers = obj(input.sip_headers);
      const byName = new Map();
      for (const k of keys(headers)) byName.set(apply(lower, k, []), S(headers[k]));
      const sip = {};
      for (const k of keys(headers)) sip[k] = S(headers[k]);
      hidden(sip, 'get', function get(name) {
        const v = byName.get(apply(lower, S(name), []));
        return v === undefined ? null : v;
      });
      hidden(sip, 'has', function has(name) { return byName.has(apply(lower, S(name), [])); });
      conv = {
        conversation_id: S(input.conversation_id ?? ''),
        channel: S(input.channel ?? ''),
        environment: S(input.environment ?? ''),
        variant: isObject(input.variant) ? input.variant : null,
        state,
        integration_attributes: obj(input.integration_attributes),
        metadata: obj(input.metadata),
        sip_headers: sip,
        variables: obj(input.variables),
      };
      hidden(conv, 'say', function say(text) { said[said.length] = S(text); });
      hidden(conv, 'handoff', function handoff_(destination, reason) {
        handoff = { destination: S(destination), reason: reason === undefined ? '' : S(reason) };
      });
      hidden(conv, 'end', function end() { ended = true; });
      const list = parse(argsJson);
      for (let i = 0; i < list.length; i++) args[i] = list[i] === null ? undefined : parse(list[i]);
    },
    arm(f) {
      fn = f;
      defineProperty(G, callKey, { value: go, writable: true, configurable: true, enumerable: false });
    },
    importError() { return new Error('import() is not available in project functions'); },
    status() { return status; },
    value() { return value; },
    message() { return message; },
    describe,
    output() {
      let state = inputState;
      try {
        const text = stringify(conv.state);
        if (typeof text === 'string' && isObject(parse(text))) state = text;
      } catch (_) {}
      // Built by hand from strings: stringify of a string primitive consults no (tenant-patchable) toJSON.
      let list = '';
      for (let i = 0; i < said.length; i++) list += (i ? ',' : '') + stringify(said[i]);
      const h = handoff === null ? 'null'
        : '{"destination":' + stringify(handoff.destination) + ',"reason":' + stringify(handoff.reason) + '}';
      return '{"state":' + stringify(state) + ',"said":[' + list + '],"handoff":' + h + ',"ended":' + (ended ? 'true' : 'false') + '}';
    },
  });
})`,
  { filename: 'sandbox:bootstrap' },
);

interface Controller {
  init(conv: string, args: string): void;
  arm(fn: unknown): void;
  importError(): unknown;
  status(): 'idle' | 'pending' | 'ok' | 'error';
  value(): unknown;
  message(): string;
  describe(e: unknown): string;
  output(): string;
}

const MAX_MESSAGE = 4000;

class Timeout extends Error {}

function isTimeoutError(e: unknown): boolean {
  // The vm watchdog's error is made in the context's realm, so no `instanceof Error` here. A tenant faking it
  // only earns itself a timeout.
  try {
    return e !== null && typeof e === 'object' && (e as { code?: unknown }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT';
  } catch {
    return false;
  }
}

function clip(s: string): string {
  return s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE)}…` : s;
}

function toClonable(value: unknown): unknown {
  try {
    return structuredClone(value);
  } catch {
    try {
      return String(value);
    } catch {
      return '[unprintable value]';
    }
  }
}

function readOutput(ctl: Controller): ConvOutput {
  const raw = JSON.parse(ctl.output()) as { state: string; said: string[]; handoff: ConvOutput['handoff']; ended: boolean };
  const state = JSON.parse(raw.state) as Record<string, unknown>;
  return { state, said: raw.said, handoff: raw.handoff, ended: raw.ended === true };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

type Outcome =
  | { ok: true; value: unknown; conv: ConvOutput }
  | { ok: false; error: { kind: FunctionErrorKind; message: string }; conv?: ConvOutput };

function fail(kind: FunctionErrorKind, message: string, conv?: ConvOutput): Outcome {
  return conv ? { ok: false, error: { kind, message: clip(message) }, conv } : { ok: false, error: { kind, message: clip(message) } };
}

async function run(call: WorkerCall): Promise<Outcome> {
  const deadline = performance.now() + call.timeoutMs;
  const remaining = () => {
    const ms = Math.floor(deadline - performance.now());
    if (ms <= 0) throw new Timeout();
    return ms;
  };
  const context = vm.createContext(Object.create(null), {
    name: `function ${call.name}`,
    codeGeneration: { strings: false, wasm: false },
  });
  const callKey = `__call_${randomBytes(12).toString('hex')}`;
  const ctl = (BOOTSTRAP.runInContext(context) as (key: string) => Controller)(callKey);
  ctl.init(call.conv, call.args);
  const importModuleDynamically = (): never => {
    throw ctl.importError();
  };

  // Compile: `(${source})` turns a named declaration into an expression.
  let fn: unknown;
  try {
    const source = call.source.replace(/[\s;]+$/, '');
    let script: vm.Script;
    try {
      script = new vm.Script(`(${source}\n)`, { filename: `${call.name}.js`, importModuleDynamically } as vm.ScriptOptions);
    } catch (e) {
      return fail('compile', e instanceof Error ? e.message : String(e));
    }
    try {
      fn = script.runInContext(context, { timeout: remaining(), breakOnSigint: false });
    } catch (e) {
      if (isTimeoutError(e)) throw new Timeout();
      return fail('compile', ctl.describe(e));
    }
    if (typeof fn !== 'function') return fail('compile', `the source does not evaluate to a function (got ${fn === null ? 'null' : typeof fn})`);

    // Call: the synchronous part runs under the vm timeout, the rest is awaited inside the context.
    ctl.arm(fn);
    const callScript = new vm.Script(`this[${JSON.stringify(callKey)}]()`, { filename: 'sandbox:call' });
    try {
      callScript.runInContext(context, { timeout: remaining(), breakOnSigint: false });
    } catch (e) {
      if (isTimeoutError(e)) throw new Timeout();
      return fail('error', ctl.describe(e), readOutput(ctl));
    }
    for (let spins = 0; ctl.status() === 'pending'; spins++) {
      remaining();
      await (spins < 4 ? tick() : sleep(Math.min(20, spins)));
    }
  } catch (e) {
    if (e instanceof Timeout) return fail('timeout', `the function ran longer than ${call.timeoutMs} ms`);
    throw e;
  }
  const conv = readOutput(ctl);
  if (ctl.status() === 'error') return fail('error', ctl.message(), conv);
  return { ok: true, value: toClonable(ctl.value()), conv };
}

const port = parentPort;
if (!port) throw new Error('actors/functions/worker.js must run in a worker thread');

port.on('message', (call: WorkerCall) => {
  if (call?.type !== 'call') return;
  run(call).then(
    (outcome) => port.postMessage({ type: 'result', id: call.id, ...outcome } as WorkerMessage),
    (e: unknown) =>
      port.postMessage({
        type: 'result',
        id: call.id,
        ok: false,
        error: { kind: 'error', message: clip(`sandbox failure: ${e instanceof Error ? e.message : String(e)}`) },
      } as WorkerMessage),
  );
});
port.postMessage({ type: 'ready' } as WorkerMessage);
