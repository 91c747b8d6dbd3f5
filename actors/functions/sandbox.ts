/**
 * The project-functions sandbox: a lazily grown pool of worker threads (each its own V8 isolate with heap
 * limits), one call per worker at a time, a fresh `vm` context per call (see `worker.ts`), and a wall-clock
 * timer here in the parent that terminates and replaces a worker whose call overruns.
 */
import { Worker } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import type { ConvOutput, FunctionErrorKind, FunctionSandbox, InvokeRequest, InvokeResult } from './types.js';
import type { WorkerCall, WorkerMessage } from './worker-protocol.js';

export interface FunctionSandboxOptions {
  /** Worker threads in the pool (created on demand). Default 2. */
  threads?: number;
  /** Default wall-clock limit per call, when the request has none. Default 1000 ms. */
  timeoutMs?: number;
  /** Old-generation heap limit of each worker. Default 64 MB. */
  maxHeapMb?: number;
}

/** How long past its limit a call may take before the parent stops waiting for the worker's own verdict. */
const GRACE_MS = 50;
const WORKER_URL = new URL('./worker.js', import.meta.url);

interface Job {
  call: WorkerCall;
  inputState: Record<string, unknown>;
  queuedAt: number;
  startedAt?: number;
  timer?: NodeJS.Timeout;
  done: boolean;
  resolve: (result: InvokeResult) => void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  dead: boolean;
  job: Job | null;
}

type Failure = { kind: FunctionErrorKind; message: string };

function copyState(state: unknown): Record<string, unknown> {
  try {
    const copy: unknown = JSON.parse(JSON.stringify(state ?? {}));
    return copy !== null && typeof copy === 'object' && !Array.isArray(copy) ? (copy as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function unchanged(state: Record<string, unknown>): ConvOutput {
  return { state, said: [], handoff: null, ended: false };
}

/** Accepts only a well-formed `ConvOutput` from a worker; anything else keeps the input state. */
function checkOutput(conv: ConvOutput | undefined, inputState: Record<string, unknown>): ConvOutput {
  if (!conv || typeof conv !== 'object') return unchanged(inputState);
  const state = conv.state !== null && typeof conv.state === 'object' && !Array.isArray(conv.state) ? conv.state : inputState;
  const said = Array.isArray(conv.said) ? conv.said.filter((s): s is string => typeof s === 'string') : [];
  const h = conv.handoff;
  const handoff = h && typeof h.destination === 'string' && typeof h.reason === 'string' ? { destination: h.destination, reason: h.reason } : null;
  return { state, said, handoff, ended: conv.ended === true };
}

/**
 * Creates a sandbox for project functions. Workers are started on first use; `close()` stops them.
 * `invoke` never throws for tenant faults (they come back as `{ok: false, error}`); it throws only once closed.
 */
export function createFunctionSandbox(options: FunctionSandboxOptions = {}): FunctionSandbox {
  const threads = Math.max(1, Math.floor(options.threads ?? 2));
  const defaultTimeoutMs = Math.max(1, options.timeoutMs ?? 1000);
  const maxHeapMb = Math.max(8, Math.floor(options.maxHeapMb ?? 64));
  const slots: Slot[] = [];
  const queue: Job[] = [];
  let nextId = 1;
  let closed = false;

  function finish(job: Job, outcome: { ok: true; value: unknown; conv: ConvOutput } | { ok: false; error: Failure; conv?: ConvOutput }): void {
    if (job.done) return;
    job.done = true;
    if (job.timer) clearTimeout(job.timer);
    const durationMs = performance.now() - (job.startedAt ?? job.queuedAt);
    if (outcome.ok) {
      job.resolve({ ok: true, value: outcome.value, conv: checkOutput(outcome.conv, job.inputState), durationMs });
    } else {
      const conv = outcome.conv ? checkOutput(outcome.conv, job.inputState) : unchanged(job.inputState);
      job.resolve({ ok: false, error: { kind: outcome.error.kind, message: String(outcome.error.message) }, conv, durationMs });
    }
  }

  /** Takes a worker out of the pool and stops it; a replacement is created when work needs one. */
  function retire(slot: Slot): void {
    if (slot.dead) return;
    slot.dead = true;
    const i = slots.indexOf(slot);
    if (i >= 0) slots.splice(i, 1);
    slot.worker.terminate().catch(() => undefined);
  }

  /** A worker died (out of memory, crash, exit): fail its call; if it never started, fail the queue too. */
  function lost(slot: Slot, failure: Failure): void {
    if (slot.dead) return;
    const job = slot.job;
    slot.job = null;
    const wasReady = slot.ready;
    retire(slot);
    if (job) finish(job, { ok: false, error: failure });
    if (!wasReady) {
      // A worker that cannot start would be replaced by another that cannot either: give up on the queue.
      for (const queued of queue.splice(0)) finish(queued, { ok: false, error: { kind: 'error', message: `function sandbox worker failed to start: ${failure.message}` } });
    }
    pump();
  }

  function spawn(): void {
    const worker = new Worker(WORKER_URL, {
      resourceLimits: {
        maxOldGenerationSizeMb: maxHeapMb,
        maxYoungGenerationSizeMb: Math.min(16, Math.max(2, Math.floor(maxHeapMb / 4))),
        stackSizeMb: 4,
      },
      // `--experimental-vm-modules` lets worker.ts give `import()` an in-context rejection (see there);
      // an explicit list also keeps the parent's loaders and flags out of the workers.
      execArgv: ['--experimental-vm-modules'],
      argv: [],
      env: {},
    });
    // A starting or busy worker keeps the process alive; an idle one does not (see `idle`).
    const slot: Slot = { worker, ready: false, dead: false, job: null };
    slots.push(slot);
    worker.on('message', (msg: WorkerMessage) => {
      if (slot.dead) return;
      if (msg.type === 'ready') {
        slot.ready = true;
        pump();
        idle(slot);
        return;
      }
      const job = slot.job;
      if (!job || job.call.id !== msg.id) return;
      slot.job = null;
      if (msg.ok) finish(job, { ok: true, value: msg.value, conv: msg.conv });
      else finish(job, { ok: false, error: msg.error, conv: msg.conv });
      // After a timeout the context may still hold work: start afresh rather than trust it.
      if (!msg.ok && msg.error.kind === 'timeout') retire(slot);
      pump();
      idle(slot);
    });
    worker.on('error', (err: Error & { code?: string }) => {
      if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') lost(slot, { kind: 'memory', message: 'the function exceeded its memory limit' });
      else lost(slot, { kind: 'error', message: `function sandbox worker failed: ${err.message}` });
    });
    worker.on('exit', (code) => lost(slot, { kind: 'error', message: `function sandbox worker exited with code ${code}` }));
  }

  function idle(slot: Slot): void {
    if (!slot.dead && slot.job === null) slot.worker.unref();
  }

  function dispatch(slot: Slot, job: Job): void {
    slot.job = job;
    slot.worker.ref();
    job.startedAt = performance.now();
    job.timer = setTimeout(() => {
      if (job.done || slot.job !== job) return;
      slot.job = null;
      finish(job, { ok: false, error: { kind: 'timeout', message: `the function ran longer than ${job.call.timeoutMs} ms` } });
      retire(slot);
      pump();
    }, job.call.timeoutMs + GRACE_MS);
    slot.worker.postMessage(job.call);
  }

  function pump(): void {
    if (closed) return;
    while (queue.length > 0) {
      const idle = slots.find((s) => s.ready && !s.dead && s.job === null);
      if (!idle) break;
      dispatch(idle, queue.shift()!);
    }
    const starting = slots.filter((s) => !s.ready).length;
    let wanted = queue.length - starting;
    while (wanted > 0 && slots.length < threads) {
      spawn();
      wanted--;
    }
  }

  return {
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
      return new Promise<InvokeResult>((resolve) => {
        queue.push({
          call: { type: 'call', id: nextId++, name: String(request.name), source, conv, args, timeoutMs },
          inputState,
          queuedAt,
          done: false,
          resolve,
        });
        pump();
      });
    },

    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      const failure: Failure = { kind: 'error', message: 'function sandbox closed' };
      for (const job of queue.splice(0)) finish(job, { ok: false, error: failure });
      const stopping = slots.splice(0).map((slot) => {
        slot.dead = true;
        if (slot.job) finish(slot.job, { ok: false, error: failure });
        slot.job = null;
        return slot.worker.terminate().catch(() => undefined);
      });
      await Promise.all(stopping);
    },
  };
}
