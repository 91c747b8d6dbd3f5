/**
 * Runs one project-function call in a fresh QuickJS runtime (inside a sandbox process, see `child.ts`).
 *
 * Each call gets its own runtime and context, so calls share nothing, with the call's memory limit, stack limit
 * and an interrupt on its time limit (`budget.ts`). Only strings cross between this file and the QuickJS realm
 * (see `bootstrap.ts`).
 */
import type { QuickJSContext, QuickJSHandle, QuickJSRuntime, QuickJSWASMModule } from 'quickjs-emscripten-core';
import { BOOTSTRAP_SOURCE } from './bootstrap.js';
import { Budget } from './budget.js';
import type { CallMessage } from './protocol.js';
import type { FunctionErrorKind } from './types.js';

const MAX_MESSAGE = 4000;

export type CallOutcome =
  | { ok: true; value?: string; conv: string }
  | { ok: false; error: { kind: FunctionErrorKind; message: string }; conv?: string };

/**
 * The source without trailing white space and semicolons. A loop, not `/[\s;]+$/`: that pattern rescans a long
 * run of spaces from each of its characters, and the source is the tenant's.
 */
function withoutTrailingSemicolons(source: string): string {
  let end = source.length;
  while (end > 0 && (source[end - 1] === ';' || /\s/.test(source[end - 1]))) end--;
  return source.slice(0, end);
}

/**
 * The most a call may hand back: its conversation output (the state, what it said, its handoff, as JSON text)
 * and its return value, in bytes of UTF-8 (what the journal, the snapshots and the answers hold). Past either the
 * call is a function error and changes nothing: the platform writes the state into every later snapshot and what
 * was said into the journal and the read models, so an unbounded output would cost every later turn, and every
 * tenant sharing the disk and the projection thread. Counted in bytes, not in a string's `length` (UTF-16 code
 * units): a character of CJK text is one code unit and three bytes, so a limit in code units let a function
 * store three times the documented size.
 */
export const MAX_OUTPUT_BYTES = 256 * 1024;
export const MAX_VALUE_BYTES = 64 * 1024;
const TOO_LARGE = `the function's output is too large: the conversation state with what it said at most ${MAX_OUTPUT_BYTES / 1024} KiB (UTF-8 bytes) as JSON, its return value at most ${MAX_VALUE_BYTES / 1024} KiB`;

/**
 * Whether `text` is more than `limit` bytes as UTF-8. `Buffer.byteLength` counts without encoding a copy; a
 * string's `length` bounds its UTF-8 size from below (a code unit is at least one byte, a surrogate pair four
 * bytes) and a third of it from above, so most strings are decided without the count.
 */
export function overBytes(text: string, limit: number): boolean {
  if (text.length > limit) return true;
  if (text.length * 3 <= limit) return false;
  return Buffer.byteLength(text, 'utf8') > limit;
}

function clip(s: string): string {
  return s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE)}…` : s;
}

/** A failure of the call that ends it at once. `withOutput` says whether the function ran far enough to report. */
class Stop extends Error {
  constructor(
    readonly kind: FunctionErrorKind,
    message: string,
    readonly withOutput: boolean,
  ) {
    super(message);
  }
}

const OUT_OF_MEMORY = 'InternalError: out of memory';
/** What a call that used its time is told. */
const ranTooLong = (b: Budget) => `the function ran longer than its ${b.limitMs} ms of CPU time`;
const INTERRUPTED = 'InternalError: interrupted';

/**
 * QuickJS reports its own limits as `InternalError`s: "interrupted" (the time limit; uncatchable by tenant code),
 * "out of memory" and "stack overflow". The error is read only through the context's own `describe` (tenant
 * getters run inside the sandbox, under its limits); a tenant throwing a look-alike only earns itself that verdict.
 */
function verdict(ctx: QuickJSContext, error: QuickJSHandle, describe: QuickJSHandle | null, budget: Budget, ran: boolean): Stop {
  if (budget.spent) return new Stop('timeout', ranTooLong(budget), false);
  let text = 'unprintable error';
  if (describe) {
    const r = ctx.callFunction(describe, ctx.undefined, error);
    if (r.error) r.error.dispose();
    else text = r.value.consume((h) => (ctx.typeof(h) === 'string' ? ctx.getString(h) : text));
  }
  if (budget.spent) return new Stop('timeout', ranTooLong(budget), false);
  if (text === OUT_OF_MEMORY) return new Stop('memory', 'the function exceeded its memory limit', false);
  return new Stop('error', clip(text), ran);
}

/**
 * A runtime and context made ready for one call, with the bootstrap already evaluated. Preparing is the larger
 * part of a call's cost, and needs nothing of the call, so a sandbox process prepares the next one while it is
 * idle (see `child.ts`). A prepared runtime serves exactly one call and is then torn down.
 */
export interface Prepared {
  runtime: QuickJSRuntime;
  ctx: QuickJSContext;
  controller: QuickJSHandle;
  /** The time limit of the call this runtime serves; no call yet means no interrupt. */
  budget: { current: Budget | null };
}

/** Makes a fresh runtime and context and runs the trusted bootstrap in it. */
export function prepare(quickjs: QuickJSWASMModule): Prepared {
  const runtime = quickjs.newRuntime();
  const budget: Prepared['budget'] = { current: null };
  runtime.setInterruptHandler(() => budget.current?.spent ?? false);
  const ctx = runtime.newContext();
  const boot = ctx.evalCode(BOOTSTRAP_SOURCE, 'sandbox:bootstrap');
  if (boot.error) {
    boot.error.dispose();
    ctx.dispose();
    runtime.dispose();
    throw new Error('the sandbox bootstrap failed');
  }
  return { runtime, ctx, controller: boot.value, budget };
}

/**
 * Runs `call` to completion within its limits, on `prepared` (or a runtime prepared now). `broken` says the
 * runtime could not be torn down cleanly (QuickJS can leave objects behind after running out of memory): the
 * process should not be trusted with another call. Throws only for a failure of the QuickJS module itself.
 */
export function runCall(quickjs: QuickJSWASMModule, call: CallMessage, prepared: Prepared = prepare(quickjs)): { outcome: CallOutcome; broken: boolean } {
  const { runtime, ctx, controller } = prepared;
  const budget = new Budget(call.timeoutMs);
  prepared.budget.current = budget;
  runtime.setMemoryLimit(call.memoryBytes);
  runtime.setMaxStackSize(call.stackBytes);
  const handles: QuickJSHandle[] = [controller];
  const keep = <T extends QuickJSHandle>(h: T): T => (handles.push(h), h);
  let describe: QuickJSHandle | null = null;
  let ran = false;

  const method = (name: string): QuickJSHandle => keep(ctx.getProp(controller, name));
  /** Calls a controller method with string arguments; returns its result as a string, or undefined. */
  const invoke = (name: string, ...args: Array<string | QuickJSHandle>): string | undefined => {
    const fn = method(name);
    const handles = args.map((a) => (typeof a === 'string' ? keep(ctx.newString(a)) : a));
    const r = ctx.callFunction(fn, ctx.undefined, ...handles);
    if (r.error) throw r.error.consume((e) => verdict(ctx, e, describe, budget, ran));
    return r.value.consume((h) => (ctx.typeof(h) === 'string' ? ctx.getString(h) : undefined));
  };
  const output = (): string | undefined => {
    try {
      return invoke('output');
    } catch {
      return undefined;
    }
  };

  let outcome: CallOutcome;
  try {
    outcome = execute();
  } catch (e) {
    release();
    throw e;
  }
  return { outcome, broken: !release() };

  /** Frees the call's handles, context and runtime; false when QuickJS could not free them cleanly. */
  function release(): boolean {
    try {
      for (const h of handles) if (h.alive) h.dispose();
      ctx.dispose();
      runtime.dispose();
      return true;
    } catch {
      return false;
    }
  }

  function execute(): CallOutcome {
  try {
    describe = method('describe');
    invoke('init', call.conv, call.args);

    // Compile: `(${source})` turns a named declaration into an expression.
    const source = withoutTrailingSemicolons(call.source);
    const compiled = ctx.evalCode(`(${source}\n)`, `${call.name}.js`);
    if (compiled.error) {
      const stop = compiled.error.consume((e) => verdict(ctx, e, describe, budget, false));
      throw stop.kind === 'error' ? new Stop('compile', stop.message, false) : stop;
    }
    const fn = keep(compiled.value);
    if (ctx.typeof(fn) !== 'function') {
      const got = ctx.sameValue(fn, ctx.null) ? 'null' : ctx.typeof(fn);
      throw new Stop('compile', `the source does not evaluate to a function (got ${got})`, false);
    }

    ran = true;
    invoke('run', fn);
    for (;;) {
      const status = invoke('status');
      if (status !== 'pending') break;
      const jobs = runtime.executePendingJobs(-1);
      if (jobs.error) throw jobs.error.consume((e) => verdict(ctx, e, describe, budget, ran));
      // Nothing left to run and still pending: no host callback exists that could ever settle it.
      if (jobs.value === 0 && invoke('status') === 'pending') throw new Stop('timeout', `the function's promise never settled (limit ${call.timeoutMs} ms)`, false);
    }
    const conv = invoke('output');
    if (conv === undefined) throw new Stop('error', 'the sandbox could not read the conversation back', false);
    if (overBytes(conv, MAX_OUTPUT_BYTES)) return { ok: false, error: { kind: 'error', message: TOO_LARGE } };
    if (invoke('status') === 'error') {
      const message = invoke('message') ?? 'error';
      // The async wrapper sees what the function threw, the engine's own limit errors included.
      if (message === INTERRUPTED || budget.spent) return { ok: false, error: { kind: 'timeout', message: ranTooLong(budget) } };
      if (message === OUT_OF_MEMORY) return { ok: false, error: { kind: 'memory', message: 'the function exceeded its memory limit' } };
      return { ok: false, error: { kind: 'error', message: clip(message) }, conv };
    }
    // Taken without its state, the call would drop what it set there and say nothing: an error that changes nothing.
    const unwritable = invoke('stateError');
    if (unwritable !== undefined) return { ok: false, error: { kind: 'error', message: clip(`conv.state cannot be written as JSON: ${unwritable}`) } };
    const value = invoke('value');
    if (value !== undefined && overBytes(value, MAX_VALUE_BYTES)) return { ok: false, error: { kind: 'error', message: TOO_LARGE } };
    return value === undefined ? { ok: true, conv } : { ok: true, value, conv };
  } catch (e) {
    if (!(e instanceof Stop)) throw e;
    const read = e.withOutput ? output() : undefined;
    const conv = read !== undefined && !overBytes(read, MAX_OUTPUT_BYTES) ? read : undefined;
    return conv === undefined ? { ok: false, error: { kind: e.kind, message: e.message } } : { ok: false, error: { kind: e.kind, message: e.message }, conv };
  }
  }
}
