/**
 * Project functions: JavaScript functions written by agent builders, run by the platform in a sandbox.
 *
 * ```ts
 * import { createFunctionSandbox } from './actors/functions/mod.js';
 * const sandbox = createFunctionSandbox({ processes: 2, timeoutMs: 1000, memoryMb: 64 });
 * log.info(await sandbox.start());                        // { layer: 'bwrap', missing: [] }
 * const result = await sandbox.invoke({ functions: artifact.functions, name: 'turn', conv, args: [message], project });
 * if (result.ok) conv.state = result.conv.state;          // said / handoff / ended are in result.conv too
 * else log.warn(result.error.kind, result.error.message); // 'error' | 'timeout' | 'memory' | 'not_found' | 'compile' | 'overloaded'
 * await sandbox.close();
 * ```
 *
 * Each call runs in a fresh QuickJS runtime (WebAssembly) with a memory limit, a stack limit and an interrupt
 * deadline, inside one of a pool of sandbox processes started with an empty environment and, where the OS allows
 * it, no network, an unprivileged uid and a read-only minimal filesystem. Calls queue fairly per project.
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
export { createFunctionSandbox, MAX_STACK_KB } from './sandbox.js';
export { WALL_FACTOR } from './budget.js';
export type { FunctionSandboxOptions } from './sandbox.js';
export type { IsolationLayer, IsolationReport } from './isolation.js';
