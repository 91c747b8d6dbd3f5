/**
 * Project functions: JavaScript written by agent builders, stored on branches and frozen into artifacts,
 * run by the platform in a sandbox: QuickJS compiled to WebAssembly, in a pool of separate sandbox processes, with
 * a memory limit, a stack limit and a time limit per call (never a V8 context of the platform).
 *
 * A function's source is one JavaScript function (declaration or expression), e.g.
 * `function start(conv) { conv.state.visits = (conv.state.visits ?? 0) + 1; conv.say('Welcome back'); }`
 * or `async (conv, message) => message.includes('balance') ? 'Your balance is 3' : undefined`.
 * Hook names: `start` (a conversation begins), `turn` (each user message; a string it returns is the answer
 * instead of the responder's), `end` (the conversation ends), `external_event` (an awaited external event arrived
 * or its wait timed out; `docs/external-events.md`), `bridge_ended` (the telephony bridge ended). Any other name is a tool the LLM responder may
 * call with JSON arguments.
 */
import type { IsolationReport } from './isolation.js';

/** What the sandbox hands a function as `conv`, besides the methods (`say`, `handoff`, `end`). */
export interface ConvInput {
  conversation_id: string;
  channel: string;
  environment: string;
  variant: { id: string; name: string } | null;
  /** Persisted conversation variables; the function may change them (returned in `ConvOutput.state`). */
  state: Record<string, unknown>;
  integration_attributes: Record<string, unknown>;
  /** This message's metadata (empty outside a turn). */
  metadata: Record<string, unknown>;
  /** SIP headers (outbound calls): exposed in the sandbox with `conv.sip_headers.get(name)`. */
  sip_headers: Record<string, string>;
  /** Real-time config variables, read at this turn. */
  variables: Record<string, unknown>;
}

/** What a function did to the conversation. */
export interface ConvOutput {
  state: Record<string, unknown>;
  /** Texts passed to `conv.say(text)`, in order. */
  said: string[];
  /** Set by `conv.handoff(destination, reason)`. */
  handoff: { destination: string; reason: string } | null;
  /** Set by `conv.end()`. */
  ended: boolean;
  /** Set by `conv.await_external_event(event_id, {timeout_ms})` (the last call wins). */
  awaiting: { event_id: string; timeout_ms: number | null } | null;
  /** Values passed to `conv.mark_pii(value)`: personal data to mute in recordings and mask in redacted transcripts. */
  pii: string[];
}

/**
 * Why a call failed: the function threw (`error`), ran past its time limit (`timeout`), passed its memory limit
 * (`memory`), does not exist (`not_found`) or does not compile (`compile`), or its project already has too many
 * calls waiting (`overloaded`).
 */
export type FunctionErrorKind = 'error' | 'timeout' | 'memory' | 'not_found' | 'compile' | 'overloaded';

export type InvokeResult =
  | { ok: true; value: unknown; conv: ConvOutput; durationMs: number }
  | { ok: false; error: { kind: FunctionErrorKind; message: string }; conv: ConvOutput; durationMs: number };

export interface InvokeRequest {
  /** Every function of the artifact: name → source. */
  functions: Record<string, string>;
  /** Which one to call. */
  name: string;
  conv: ConvInput;
  /** Arguments after `conv` (e.g. the user message for `turn`, parsed JSON for a tool). */
  args: unknown[];
  /** Wall-clock limit for this call (synchronous loops and pending promises alike). */
  timeoutMs?: number;
  /** The project the call runs for: calls queue fairly per project (see `fair-queue.ts`). */
  project?: string;
  /** The project's account: an account's projects together get one account's share (see `fair-queue.ts`). */
  account?: string;
}

export interface FunctionSandbox {
  /** Runs one function. Never throws for tenant faults: they come back as `{ok: false, error}`. */
  invoke(request: InvokeRequest): Promise<InvokeResult>;
  /** Chooses the OS isolation and starts the processes; resolves with what the isolation provides. */
  start(): Promise<IsolationReport>;
  /** Process ids of the pool's processes that take calls (for the operator's diagnostics and the tests). */
  pids(): number[];
  /** Stops the sandbox processes; queued and running calls fail. */
  close(): Promise<void>;
}
