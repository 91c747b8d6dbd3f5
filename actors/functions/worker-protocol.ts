/**
 * Messages between the function sandbox (parent thread, `sandbox.ts`) and its worker threads (`worker.ts`).
 * Everything tenant-supplied crosses as JSON text, so the worker never hands a host-realm object to tenant code.
 */
import type { ConvOutput, FunctionErrorKind } from './types.js';

/** Parent → worker: run one function. */
export interface WorkerCall {
  type: 'call';
  id: number;
  /** The function's name (used for the script's file name in stack traces). */
  name: string;
  /** The function's source: one function declaration or expression. */
  source: string;
  /** `JSON.stringify(ConvInput)`. */
  conv: string;
  /** JSON array with one entry per argument: the argument's own JSON text, or null for `undefined`. */
  args: string;
  timeoutMs: number;
}

/** Worker → parent. */
export type WorkerMessage =
  | { type: 'ready' }
  | { type: 'result'; id: number; ok: true; value: unknown; conv: ConvOutput }
  | {
      type: 'result';
      id: number;
      ok: false;
      error: { kind: FunctionErrorKind; message: string };
      /** Absent when the function did not run (compile error, timeout): the parent returns the input state unchanged. */
      conv?: ConvOutput;
    };
