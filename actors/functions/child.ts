/**
 * Entry point of a sandbox process (started by `process.ts`, inside the isolation `isolation.ts` chose). It loads
 * QuickJS compiled to WebAssembly once and serves calls one at a time: a line of JSON in on stdin, a line out on
 * stdout. Tenant code only ever runs inside QuickJS; this file is trusted and holds nothing worth stealing (the
 * platform starts it with an empty environment and no descriptors but its three pipes).
 */
import { createInterface } from 'node:readline';
import { newQuickJSWASMModuleFromVariant, newVariant, type QuickJSSyncVariant } from 'quickjs-emscripten-core';
import { prepare, runCall, type Prepared } from './quickjs-call.js';
import type { CallMessage, ChildMessage } from './protocol.js';

const send = (message: ChildMessage): void => {
  process.stdout.write(`${JSON.stringify(message)}\n`);
};

/** WebAssembly pages (64 KiB) the module itself needs: its static data and C stack (the build's initial memory). */
const BASE_PAGES = 256;
const memoryMb = Number(/^--memory-mb=(\d+)$/.exec(process.argv[2] ?? '')?.[1] ?? 64);
// In this WebAssembly build QuickJS cannot measure its allocations (no malloc_usable_size), so its own memory limit
// only refuses single allocations larger than the limit. The memory's maximum is the real, cumulative bound: past
// it malloc fails and QuickJS throws its out-of-memory error. Calls run one at a time on a fresh runtime, so the
// process's bound is each call's bound; freed memory is reused by the next call.
const wasmMemory = new WebAssembly.Memory({ initial: BASE_PAGES, maximum: BASE_PAGES + memoryMb * 16 });
// The release-sync variant: no asyncify, nothing to build. Its types describe the CommonJS entry; the ES entry
// Node loads here exports the variant as its default.
const base = (await import('@jitl/quickjs-wasmfile-release-sync')).default as unknown as QuickJSSyncVariant;
const quickjs = await newQuickJSWASMModuleFromVariant(newVariant(base, { wasmMemory }));
/** The next call's runtime, prepared while this process is idle (a fresh one per call, never reused). */
let next: Prepared | null = null;
const warm = (): void => {
  if (next) return;
  try {
    next = prepare(quickjs);
  } catch {
    // Preparing again at the next call reports the failure with that call.
  }
};

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  let call: CallMessage;
  try {
    call = JSON.parse(line) as CallMessage;
  } catch {
    return;
  }
  if (call?.type !== 'call') return;
  try {
    const prepared = next ?? undefined;
    next = null;
    const { outcome, broken } = runCall(quickjs, call, prepared);
    send({ type: 'result', id: call.id, ...outcome, rss: process.memoryUsage.rss(), ...(broken ? { fatal: true } : {}) });
    if (broken) process.stdout.write('', () => process.exit(70));
    else setImmediate(warm);
  } catch (e) {
    // The WebAssembly module itself failed (host stack exhausted, an engine assertion): its memory may be
    // inconsistent, so this process answers and exits; the pool starts a fresh one.
    const message = `sandbox failure: ${e instanceof Error ? e.message : String(e)}`.slice(0, 500);
    send({ type: 'result', id: call.id, ok: false, error: { kind: 'error', message }, rss: process.memoryUsage.rss(), fatal: true });
    process.stdout.write('', () => process.exit(70));
  }
});
lines.on('close', () => process.exit(0));
warm();
// Ready once the event loop has turned: at its first turn the main thread waits for V8's background compilation of
// the module to finish (over 100 ms here), which would otherwise be charged to the first call's time limit.
setImmediate(() => send({ type: 'ready' }));
