/**
 * Messages between the sandbox pool (`sandbox.ts`, in the platform) and a sandbox process (`child.ts`): one JSON
 * object per line on the child's stdin and stdout. Everything tenant-made crosses as JSON text, which the
 * platform parses as data; the child never sees a platform object and the platform never runs child code.
 */
import type { FunctionErrorKind } from './types.js';

/** Platform → sandbox process: run one function in a fresh QuickJS runtime. */
export interface CallMessage {
  type: 'call';
  id: number;
  /** The function's name (its file name in the sandbox's stack traces). */
  name: string;
  /** The function's source: one function declaration or expression. */
  source: string;
  /** `JSON.stringify(ConvInput)`. */
  conv: string;
  /** JSON array with one entry per argument: the argument's own JSON text, or null for `undefined`. */
  args: string;
  timeoutMs: number;
  /** QuickJS memory limit of the call's runtime. */
  memoryBytes: number;
  /** QuickJS stack limit of the call's runtime. */
  stackBytes: number;
}

/** Sandbox process → platform. `rss` is the process's resident size after the call, for recycling. */
export type ChildMessage =
  | { type: 'ready' }
  | {
      type: 'result';
      id: number;
      ok: true;
      /** The return value as JSON text; absent for `undefined`. */
      value?: string;
      /** `ConvOutput` as JSON text. */
      conv: string;
      rss: number;
      /** The process exits after this reply (see `fatal` below). */
      fatal?: boolean;
    }
  | {
      type: 'result';
      id: number;
      ok: false;
      error: { kind: FunctionErrorKind; message: string };
      /** Absent when the function did not run (compile error, timeout): the platform keeps the input state. */
      conv?: string;
      rss: number;
      /** QuickJS failed in a way that may have left the process inconsistent: it exits after this reply. */
      fatal?: boolean;
    };
