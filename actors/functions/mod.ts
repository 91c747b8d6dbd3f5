/**
 * Project functions: JavaScript functions written by agent builders, run by the platform in a sandbox.
 *
 * ```ts
 * import { createFunctionSandbox } from './actors/functions/mod.js';
 * const sandbox = createFunctionSandbox({ threads: 2, timeoutMs: 1000, maxHeapMb: 64 });
 * const result = await sandbox.invoke({ functions: artifact.functions, name: 'turn', conv, args: [message] });
 * if (result.ok) conv.state = result.conv.state;          // said / handoff / ended are in result.conv too
 * else log.warn(result.error.kind, result.error.message); // 'error' | 'timeout' | 'memory' | 'not_found' | 'compile'
 * await sandbox.close();
 * ```
 *
 * Each call runs in a fresh `vm` context (no `process`, `require`, `import()`, timers or string code generation)
 * inside a pooled worker thread with heap limits; a call that overruns its wall-clock limit has its worker
 * terminated and replaced.
 *
 * @module
 */
export type {
  ConvInput,
  ConvOutput,
  FunctionErrorKind,
  FunctionSandbox,
  InvokeRequest,
  InvokeResult,
} from './types.js';
/**
 * Creates a pool of sandbox workers (lazily started): `threads` (default 2) workers, `timeoutMs` (default 1000)
 * per call unless the request sets its own, `maxHeapMb` (default 64) old-generation heap per worker.
 */
export { createFunctionSandbox } from './sandbox.js';
export type { FunctionSandboxOptions } from './sandbox.js';
