/**
 * The project-functions sandbox: a pool of sandbox processes (`process.ts`), each running QuickJS compiled to
 * WebAssembly (`child.ts`), fed from a per-project fair queue (`fair-queue.ts`).
 *
 * What tenant code can reach is QuickJS's own realm and nothing else: no V8 context of the platform, no host
 * function (the `conv` API is built inside QuickJS, see `bootstrap.ts`), no process, file or network API. The
 * process around it is a second wall (`isolation.ts`): empty environment, no descriptors of ours, and where the OS
 * allows it no network, an unprivileged uid and a read-only minimal filesystem.
 */
import { performance } from 'node:perf_hooks';
import sjson from 'secure-json-parse';
import { FairQueue } from '../../platform/fair-queue.js';
import { chooseIsolation, type IsolationLayer, type IsolationReport } from './isolation.js';
import { SandboxProcess, type CallReply } from './process.js';
import type { CallMessage } from './protocol.js';
import type { ConvOutput, FunctionErrorKind, FunctionSandbox, InvokeRequest, InvokeResult } from './types.js';
import { jsonTooDeep, tooDeepMessage } from '../../platform/json-depth.js';

/** The largest QuickJS stack limit at which every recursion QuickJS checks ends in its own error, not on the host stack (tested; see `hostStackKb`). */
export const MAX_STACK_KB = 320;

export interface FunctionSandboxOptions {
  /** Sandbox processes in the pool. Default 4: calls are short, so what bounds throughput is calls in flight, not cores. */
  processes?: number;
  /** Default wall-clock limit per call, when the request has none. Default 1000 ms. */
  timeoutMs?: number;
  /** Memory of one call (heap, strings and array buffers): the bound of the process's WebAssembly memory. Default 64 MiB. */
  memoryMb?: number;
  /** QuickJS stack limit per call, at most `MAX_STACK_KB`. Default 256 KiB. */
  stackKb?: number;
  /**
   * Calls of one project running at once. Default `processes`: the pool is work-conserving, and another project's
   * call still waits at most one call's time limit (see `fair-queue.ts`); a lower quota reserves processes.
   */
  projectConcurrency?: number;
  /** Calls of one project waiting at once; more are refused as `overloaded`. Default 256. */
  queuePerProject?: number;
  /** A process whose resident size passes this after a call is replaced (WebAssembly memory never shrinks). Default 512 MiB. */
  processMaxMb?: number;
  /** OS isolation around each process: the strongest available (`auto`, default) or one that must work. */
  isolation?: IsolationLayer | 'auto';
}

/**
 * A call may wait this many times its own time limit for a process before it fails. Time in which no process of
 * the pool was ready (the pool starting, or replacing the processes it killed) does not count: a cold start takes
 * longer than a short time limit, and a call is not the tenant's failure for waiting through it.
 */
const QUEUE_WAIT_FACTOR = 10;
/** After this many processes in a row die before loading, queued calls fail instead of waiting. */
const START_FAILURES = 3;

type Failure = { kind: FunctionErrorKind; message: string };

interface Job {
  message: CallMessage;
  inputState: Record<string, unknown>;
  queuedAt: number;
  /** The pool's time without a ready process (`starved`) when the call was queued. */
  starvedAtQueue: number;
  resolve: (result: InvokeResult) => void;
}

function copyState(state: unknown): Record<string, unknown> {
  try {
    const copy: unknown = JSON.parse(JSON.stringify(state ?? {}));
    return copy !== null && typeof copy === 'object' && !Array.isArray(copy) ? (copy as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function unchanged(state: Record<string, unknown>): ConvOutput {
  return { state, said: [], handoff: null, ended: false, awaiting: null, pii: [] };
}

/** Tenant-made JSON text, parsed as plain data (`__proto__` and `constructor.prototype` keys removed). */
function parseData(text: string): unknown {
  return sjson.parse(text, undefined, { protoAction: 'remove', constructorAction: 'remove' });
}

/** Accepts only a well-formed `ConvOutput`; anything else keeps the input state. */
function checkOutput(text: string | undefined, inputState: Record<string, unknown>): ConvOutput {
  let conv: Partial<ConvOutput> | null = null;
  try {
    conv = text === undefined ? null : (parseData(text) as Partial<ConvOutput>);
  } catch {
    conv = null;
  }
  if (!conv || typeof conv !== 'object') return unchanged(inputState);
  const state = conv.state !== null && typeof conv.state === 'object' && !Array.isArray(conv.state) ? conv.state : inputState;
  const said = Array.isArray(conv.said) ? conv.said.filter((s): s is string => typeof s === 'string') : [];
  const h = conv.handoff;
  const handoff = h && typeof h.destination === 'string' && typeof h.reason === 'string' ? { destination: h.destination, reason: h.reason } : null;
  const a = conv.awaiting;
  const awaiting =
    a && typeof a === 'object' && typeof a.event_id === 'string'
      ? { event_id: a.event_id, timeout_ms: typeof a.timeout_ms === 'number' && Number.isFinite(a.timeout_ms) ? a.timeout_ms : null }
      : null;
  const pii = Array.isArray(conv.pii) ? conv.pii.filter((s): s is string => typeof s === 'string' && s.length > 0 && s.length <= 256).slice(0, 32) : [];
  return { state, said, handoff, ended: conv.ended === true, awaiting, pii };
}

/**
 * Creates a sandbox for project functions. Processes start on `start()` or the first call; `close()` stops them.
 * `invoke` never throws for tenant faults (they come back as `{ok: false, error}`); it rejects only once closed.
 */
export function createFunctionSandbox(options: FunctionSandboxOptions = {}): FunctionSandbox {
  const processes = Math.max(1, Math.floor(options.processes ?? 4));
  const defaultTimeoutMs = Math.max(1, options.timeoutMs ?? 1000);
  const memoryMb = Math.max(1, options.memoryMb ?? 64);
  const memoryBytes = memoryMb * 1024 * 1024;
  const stackBytes = Math.min(MAX_STACK_KB, Math.max(16, options.stackKb ?? 256)) * 1024;
  const quota = Math.max(1, Math.floor(options.projectConcurrency ?? processes));
  const ceiling = Math.max(128, options.processMaxMb ?? 512) * 1024 * 1024;
  const queue = new FairQueue<Job>(quota, Math.max(1, options.queuePerProject ?? 256));
  const pool: SandboxProcess[] = [];
  let isolation: Promise<IsolationReport> | null = null;
  let layer: IsolationLayer | null = null;
  let startFailures = 0;
  /**
   * Projects whose call cost its process (killed, crashed or retired past the ceiling), oldest first: each
   * keeps that call's slot in the fair queue until a new process is ready, so the cold start counts against
   * the project that caused it, not against whoever the pool would have served meanwhile.
   */
  const restarting: string[] = [];
  let nextId = 1;
  let closed = false;
  /** Time the pool has spent with no ready process, up to `starvedSince` (when the current such spell began). */
  let starvedMs = 0;
  let starvedSince: number | null = performance.now();

  const starved = (now: number): number => starvedMs + (starvedSince === null ? 0 : now - starvedSince);
  /** Starts or ends a spell without a ready process; called whenever a process may have become ready or gone. */
  function noteReadiness(now: number): void {
    const ready = pool.some((p) => p.isReady);
    if (ready && starvedSince !== null) {
      starvedMs += now - starvedSince;
      starvedSince = null;
    } else if (!ready && starvedSince === null) starvedSince = now;
  }

  function finish(job: Job, reply: CallReply | { ok: false; error: Failure; conv?: string }): void {
    const durationMs = performance.now() - job.queuedAt;
    // Too deep for what the platform does next with it (msgpackr's snapshot and journal encoding recurses, and a
    // state nested some thousand levels overflows its stack: a conversation that can commit no step again). The
    // text is measured before anything is parsed: a function error, the state as it was.
    if ((reply.conv !== undefined && jsonTooDeep(reply.conv)) || (reply.ok && reply.value !== undefined && jsonTooDeep(reply.value))) {
      job.resolve({ ok: false, error: { kind: 'error', message: `the function's state or value: ${tooDeepMessage()}` }, conv: unchanged(job.inputState), durationMs });
      return;
    }
    if (reply.ok) {
      let value: unknown;
      try {
        value = reply.value === undefined ? undefined : parseData(reply.value);
      } catch {
        value = reply.value;
      }
      job.resolve({ ok: true, value, conv: checkOutput(reply.conv, job.inputState), durationMs });
    } else {
      const conv = reply.conv === undefined ? unchanged(job.inputState) : checkOutput(reply.conv, job.inputState);
      job.resolve({ ok: false, error: { kind: reply.error.kind, message: String(reply.error.message) }, conv, durationMs });
    }
  }

  function failQueued(failure: Failure): void {
    for (const job of queue.clear()) finish(job, { ok: false, error: failure });
  }

  function onExit(proc: SandboxProcess, why: string): void {
    const i = pool.indexOf(proc);
    if (i >= 0) pool.splice(i, 1);
    noteReadiness(performance.now());
    if (closed) return;
    if (!proc.loaded) {
      startFailures++;
      if (startFailures >= START_FAILURES) {
        failQueued({ kind: 'error', message: `the function sandbox cannot start: ${why}` });
        // No replacement is coming: a project held for one would stay held.
        for (const charged of restarting.splice(0)) queue.done(charged);
        return;
      }
    }
    pump();
  }

  function spawn(): void {
    const proc = new SandboxProcess(layer!, memoryMb, onExit);
    pool.push(proc);
    proc.started().then(
      () => {
        startFailures = 0;
        const charged = restarting.shift();
        if (charged !== undefined) queue.done(charged);
        pump();
      },
      () => undefined,
    );
  }

  function dispatch(proc: SandboxProcess, project: string, job: Job): void {
    void proc.call(job.message).then((reply) => {
      finish(job, reply);
      // A failed WebAssembly module, or memory that WebAssembly will not give back: start afresh.
      if (proc.alive && (reply.fatal || proc.rss > ceiling)) proc.kill();
      if (proc.isReady) queue.done(project);
      else restarting.push(project);
      pump();
    });
  }

  function pump(): void {
    if (closed || layer === null) return;
    const now = performance.now();
    noteReadiness(now);
    const waitedOnProcesses = (j: Job) => now - j.queuedAt - (starved(now) - j.starvedAtQueue);
    for (const job of queue.drop((j) => waitedOnProcesses(j) > j.message.timeoutMs * QUEUE_WAIT_FACTOR)) {
      finish(job, { ok: false, error: { kind: 'timeout', message: 'the function waited too long for a sandbox' } });
    }
    while (queue.length > 0) {
      const idle = pool.find((p) => p.isReady && !p.busy);
      if (!idle) break;
      const next = queue.take();
      if (!next) break;
      dispatch(idle, next.project, next.item);
    }
    if (startFailures < START_FAILURES) while (pool.length < processes) spawn();
  }

  function start(): Promise<IsolationReport> {
    if (!isolation) {
      isolation = chooseIsolation(options.isolation ?? 'auto');
      isolation.then(
        (report) => {
          layer = report.layer;
          pump();
        },
        (e: Error) => failQueued({ kind: 'error', message: e.message }),
      );
    }
    return isolation;
  }

  return {
    start,

    invoke(request: InvokeRequest): Promise<InvokeResult> {
      if (closed) return Promise.reject(new Error('function sandbox is closed'));
      const queuedAt = performance.now();
      const inputState = copyState(request.conv?.state);
      const immediate = (error: Failure): Promise<InvokeResult> =>
        Promise.resolve({ ok: false, error, conv: unchanged(inputState), durationMs: performance.now() - queuedAt });

      const functions = request.functions ?? {};
      const source = Object.prototype.hasOwnProperty.call(functions, request.name) ? functions[request.name] : undefined;
      if (typeof source !== 'string') return immediate({ kind: 'not_found', message: `no function named ${JSON.stringify(String(request.name))}` });

      let conv: string;
      let args: string;
      try {
        conv = JSON.stringify({ ...request.conv, state: inputState });
        args = JSON.stringify((request.args ?? []).map((a) => (a === undefined ? null : (JSON.stringify(a) ?? null))));
      } catch (e) {
        return immediate({ kind: 'error', message: `the call's conv or arguments are not JSON: ${e instanceof Error ? e.message : String(e)}` });
      }
      const timeoutMs = Math.max(1, Math.floor(request.timeoutMs ?? defaultTimeoutMs));
      const message: CallMessage = { type: 'call', id: nextId++, name: String(request.name), source, conv, args, timeoutMs, memoryBytes, stackBytes };
      return new Promise<InvokeResult>((resolve) => {
        if (!queue.push(String(request.account ?? ''), String(request.project ?? ''), { message, inputState, queuedAt, starvedAtQueue: starved(queuedAt), resolve })) {
          resolve({ ok: false, error: { kind: 'overloaded', message: 'too many calls of this project are waiting' }, conv: unchanged(inputState), durationMs: 0 });
          return;
        }
        if (startFailures >= START_FAILURES) startFailures = 0;
        void start().catch(() => undefined);
        pump();
      });
    },

    pids(): number[] {
      return pool.filter((p) => p.isReady).map((p) => p.pid).filter((pid): pid is number => typeof pid === 'number');
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      failQueued({ kind: 'error', message: 'function sandbox closed' });
      await Promise.all(
        pool.splice(0).map((proc) => {
          proc.kill();
          return proc.exited();
        }),
      );
    },
  };
}
