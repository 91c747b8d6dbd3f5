/**
 * The platform's side of one sandbox process: starts it (`isolation.ts`), sends it one call at a time, and kills
 * it when a call overruns its wall-clock limit (`budget.ts`; QuickJS's own interrupt normally ends the call first,
 * and this is the backstop for anything the interrupt cannot reach).
 */
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { WALL_FACTOR } from './budget.js';
import { launch, type IsolationLayer } from './isolation.js';
import type { CallMessage, ChildMessage } from './protocol.js';

/** How long past its wall-clock limit (`WALL_FACTOR` times its CPU limit, `budget.ts`) a call may run before the process is killed. */
const GRACE_MS = 100;
/** The tail of a process's stderr kept for the log line when it dies. */
const STDERR_TAIL = 2000;

export type CallReply = Extract<ChildMessage, { type: 'result' }>;

/** One sandbox process. `onExit` fires once, when the process is gone for whatever reason. */
export class SandboxProcess {
  private readonly child: ChildProcess;
  private ready = false;
  private dead = false;
  /** Killed or about to exit: takes no more calls, though its exit event has not come yet. */
  private retiring = false;
  private stderr = '';
  private pending: { id: number; resolve: (r: CallReply) => void; timer: NodeJS.Timeout } | null = null;
  private readonly whenReady: Promise<void>;
  private readonly whenExited: Promise<void>;
  private markExited: () => void = () => undefined;
  /** Resident size reported after the last call. */
  rss = 0;

  /** `memoryMb` bounds the WebAssembly memory of the process's QuickJS (see `child.ts`). */
  constructor(layer: IsolationLayer, memoryMb: number, private readonly onExit: (self: SandboxProcess, why: string) => void) {
    this.child = launch(layer, [`--memory-mb=${Math.ceil(memoryMb)}`]);
    let markReady: () => void = () => undefined;
    let failReady: (e: Error) => void = () => undefined;
    this.whenReady = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    this.whenReady.catch(() => undefined);
    this.whenExited = new Promise<void>((resolve) => (this.markExited = resolve));
    this.child.stderr!.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-STDERR_TAIL);
    });
    this.child.stdin!.on('error', () => undefined);
    const lines = createInterface({ input: this.child.stdout!, crlfDelay: Infinity });
    lines.on('line', (line) => {
      let msg: ChildMessage;
      try {
        msg = JSON.parse(line) as ChildMessage;
      } catch {
        return;
      }
      if (msg.type === 'ready') {
        this.ready = true;
        markReady();
        return;
      }
      const p = this.pending;
      if (msg.type !== 'result' || !p || p.id !== msg.id) return;
      clearTimeout(p.timer);
      this.pending = null;
      this.rss = typeof msg.rss === 'number' ? msg.rss : 0;
      if (msg.fatal) this.retiring = true;
      p.resolve(msg);
    });
    const gone = (why: string) => {
      if (this.dead) return;
      this.dead = true;
      failReady(new Error(why));
      const p = this.pending;
      this.pending = null;
      if (p) {
        clearTimeout(p.timer);
        p.resolve({ type: 'result', id: p.id, ok: false, error: { kind: 'error', message: 'the function sandbox process died during the call' }, rss: 0 });
      }
      // A descendant that outlives the process (a sandbox's init killed before it could pass the signal on) would
      // hold the pipes open, and with them this process's event loop: they are closed on our side here.
      this.child.stdin?.destroy();
      this.child.stdout?.destroy();
      this.child.stderr?.destroy();
      this.markExited();
      this.onExit(this, why);
    };
    this.child.once('error', (e) => gone(`could not start: ${e.message}`));
    this.child.once('exit', (code, signal) => gone(`exited (${signal ?? code})${this.stderr ? `: ${this.stderr.trim()}` : ''}`));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return !this.dead;
  }

  get busy(): boolean {
    return this.pending !== null;
  }

  /** Resolves once the process has loaded QuickJS; rejects if it dies first. */
  started(): Promise<void> {
    return this.whenReady;
  }

  get isReady(): boolean {
    return this.ready && !this.dead && !this.retiring;
  }

  /** Whether the process ever finished loading (a process that died before that could not start). */
  get loaded(): boolean {
    return this.ready;
  }

  /** Resolves once the process is gone. */
  exited(): Promise<void> {
    return this.whenExited;
  }

  /**
   * Runs one call. Never rejects: a process that overruns the call's budget is killed and the call is a
   * `timeout`; one that dies is an `error`.
   */
  call(message: CallMessage): Promise<CallReply> {
    if (this.pending || this.dead) throw new Error('sandbox process is busy or gone');
    return new Promise<CallReply>((resolve) => {
      const timer = setTimeout(() => {
        if (this.pending?.id !== message.id) return;
        this.pending = null;
        resolve({ type: 'result', id: message.id, ok: false, error: { kind: 'timeout', message: `the function ran longer than ${message.timeoutMs * WALL_FACTOR} ms` }, rss: 0 });
        this.kill();
      }, message.timeoutMs * WALL_FACTOR + GRACE_MS);
      this.pending = { id: message.id, resolve, timer };
      this.child.stdin!.write(`${JSON.stringify(message)}\n`);
    });
  }

  /** Ends the process at once (its `onExit` follows). */
  kill(): void {
    this.retiring = true;
    if (!this.dead) this.child.kill('SIGKILL');
  }
}
