import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { openStore, type Store } from '../../store/mod.js';

/** The compiled repository root (dist/), from dist/test/helpers. */
export const DIST = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const MAIN = join(DIST, 'platform', 'main.js');
export const CLI = join(DIST, 'bin', 'switchboard.js');
/** The node flags `npm start` and the Procfile give the platform. */
export const NODE_FLAGS = ['--max-semi-space-size=64', '--initial-old-space-size=1024', '--no-allocation-site-pretenuring'];

export interface Platform {
  edge: string;
  socket: string;
  /** The worker id, when the process runs the worker role. */
  worker: string;
  dataDir: string;
  operatorToken: string;
  child: ChildProcess;
  stdout: () => string;
  /** What the process wrote to stderr so far. */
  stderr: () => string;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop: () => Promise<number | null>;
}

export interface StartOptions {
  dataDir?: string;
  env?: Record<string, string | undefined>;
  roles?: string[];
  /** Pass no OPERATOR_TOKEN so the platform generates one. */
  generateToken?: boolean;
  /**
   * Lower the process's open-file limit to this (`prlimit --nofile`) once it serves, as a small machine would
   * have it. Not at the start: Node's module loader reads the whole import graph at once, a burst of open
   * files several times what the running process holds, which a limit this low would refuse.
   */
  fdLimit?: number;
  /** A command the platform is started through, which execs it (`prlimit`, `setpriv`): the pid stays the platform's. */
  prefix?: string[];
  /**
   * Called once the process is spawned, before it serves: a test can watch a process that waits (for a NATS
   * server started after it) or stops before it serves, and kill it if it never will.
   */
  spawned?: (p: Spawned) => void;
  /** How long the process may take to serve before it is killed (default 30 s; longer when it waits on purpose). */
  readyTimeoutMs?: number;
}

/** A platform process that may not serve yet: what `StartOptions.spawned` is given. */
export interface Spawned {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (null when a signal ended it). */
  exited: Promise<number | null>;
}

/** Starts a real platform process on free ports and a fresh data dir, and waits until it serves. */
export async function startPlatform(opts: StartOptions = {}): Promise<Platform> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'sb-test-'));
  const operatorToken = opts.generateToken ? '' : opts.env?.OPERATOR_TOKEN ?? `test-operator-${randomBytes(12).toString('hex')}`;
  // As `npm start` and the Procfile run it (docs/runtime.md, "Memory": the young generation's size).
  // `--report-on-signal`: a process that does not start is asked for a diagnostic report (SIGUSR2) first,
  // whose JavaScript stack and open handles say where it waits.
  const args = [...NODE_FLAGS, '--report-on-signal', `--report-directory=${dataDir}`, MAIN, ...(opts.roles ?? [])];
  // `exec` keeps the pid: signals sent to the child reach the platform, not a shell.
  const [command, ...argv] = [...(opts.prefix ?? []), process.execPath, ...args];
  const child = spawn(command, argv, {
    env: {
      ...process.env,
      EDGE_PORT: '0',
      SOCKET_PORT: '0',
      // The media role (part of every all-roles process): SIP, TLS and RTP on free ports too.
      SIP_PORT: '0',
      SIP_TLS_PORT: '0',
      RTP_PORT_MIN: '0',
      RTP_PORT_MAX: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      OPERATOR_TOKEN: operatorToken || undefined,
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  opts.spawned?.({ child, stdout: () => out, stderr: () => err, exited });
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  const ready = await new Promise<{ edge: string; socket: string; worker: string }>((resolve, reject) => {
    // A process that does not start is killed, so that it cannot keep the test file running into tap's timeout.
    const timer = setTimeout(async () => {
      const report = await diagnosticReport(child, dataDir);
      child.kill('SIGKILL');
      reject(new Error(`platform (${opts.roles?.join('+') ?? 'all roles'}) did not start in ${readyTimeoutMs / 1000} s:\n${out}\n${err}\n${report}`));
    }, readyTimeoutMs);
    const check = () => {
      const m = /serving: (.*)\n/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      child.stdout!.off('data', check);
      resolve({
        edge: /edge (http:\/\/[^\s,]+)/.exec(m[1])?.[1] ?? '',
        socket: /socket (http:\/\/[^\s,]+)/.exec(m[1])?.[1] ?? '',
        worker: /worker ([^\s,]+)/.exec(m[1])?.[1] ?? '',
      });
    };
    child.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`platform exited with ${code}:\n${out}\n${err}`));
    });
  });
  if (opts.fdLimit) await lowerFdLimit(child, opts.fdLimit);
  const generated = /OPERATOR_TOKEN=(\S+)/.exec(out)?.[1];
  return {
    ...ready,
    dataDir,
    operatorToken: operatorToken || generated || '',
    child,
    stdout: () => out,
    stderr: () => err,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Sets a running process's open-file limit, soft and hard (`prlimit` from util-linux). */
async function lowerFdLimit(child: ChildProcess, limit: number): Promise<void> {
  const prlimit = spawn('prlimit', ['--pid', String(child.pid), `--nofile=${limit}:${limit}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  prlimit.stderr!.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((resolve, reject) => prlimit.once('error', reject).once('exit', resolve));
  if (code !== 0) throw new Error(`prlimit --nofile=${limit} failed (${code}): ${err}`);
}

/** A platform process being started: the promise of its start, and the process as soon as it is spawned. */
export interface Starting {
  role: string;
  started: Promise<Platform>;
  process: () => Spawned | undefined;
}

/**
 * Starts a platform process for test `t` without waiting for it to serve; when `t` ends, it is stopped (killed
 * if it never stopped by itself) and its data dir is left to the caller.
 */
export function starting(t: { teardown(fn: () => unknown): void }, role: string, opts: StartOptions): Starting {
  let spawned: Spawned | undefined;
  // Its time to serve may include a wait on purpose (for a NATS server the test starts later).
  const started = startPlatform({ readyTimeoutMs: 90_000, ...opts, spawned: (p) => (spawned = p) });
  // A start that fails is the test's to report (it awaits `started`), not an unhandled rejection meanwhile.
  started.catch(() => {});
  t.teardown(async () => {
    if (spawned && spawned.child.exitCode === null && spawned.child.signalCode === null) {
      spawned.child.kill('SIGTERM');
      const force = setTimeout(() => spawned!.child.kill('SIGKILL'), 15_000);
      await spawned.exited;
      clearTimeout(force);
    }
  });
  return { role, started, process: () => spawned };
}

/**
 * Starts a platform for test `t` and, when `t` ends, stops it and removes its data dir (one given in `opts` too).
 * Teardowns run last-added first: one added after this runs before the platform stops.
 */
export async function platformFor(t: { teardown(fn: () => unknown): void }, opts: StartOptions = {}): Promise<Platform> {
  const p = await startPlatform(opts);
  t.teardown(async () => {
    await p.stop();
    removeDir(p.dataDir);
  });
  return p;
}

/**
 * Opens a store on a fresh data dir, then starts a platform on it, for a test that reads the platform's store
 * directly. In this order the platform's open of the files races no commit: with lmdb-js 3.5.6 a process opening
 * an LMDB file can roll back a commit another process makes during the open (docs/storage.md), and a store opened
 * after the platform started could have cost the platform one of its own commits. This process commits nothing
 * while the platform opens (its own open made the files first).
 */
export async function startPlatformWithStore(opts: StartOptions = {}): Promise<{ p: Platform; store: Store }> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'sb-test-'));
  const store = await openStore({ dataDir });
  try {
    return { p: await startPlatform({ ...opts, dataDir }), store };
  } catch (err) {
    await store.close();
    throw err;
  }
}

/** Removes a temporary data dir. */
export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Asks a process started with `--report-on-signal` for Node's diagnostic report and gives the part that says
 * where it is: the main thread's JavaScript stack and its active handles (timers, sockets, the thread pool).
 */
async function diagnosticReport(child: ChildProcess, dir: string): Promise<string> {
  const before = new Set(readdirSync(dir));
  child.kill('SIGUSR2');
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const file = readdirSync(dir).find((f) => !before.has(f) && /^report\..*\.json$/.test(f));
    if (!file) continue;
    try {
      const r = JSON.parse(readFileSync(join(dir, file), 'utf8'));
      const handles = (r.libuv ?? []).filter((h: any) => h.is_active).map((h: any) => `${h.type}${h.localEndpoint ? ` ${JSON.stringify(h.localEndpoint)}` : ''}${h.remoteEndpoint ? ` -> ${JSON.stringify(h.remoteEndpoint)}` : ''}`);
      return `diagnostic report (${file}):\n${r.javascriptStack?.message ?? ''}\n${(r.javascriptStack?.stack ?? []).join('\n')}\nactive handles: ${handles.join('; ')}`;
    } catch {
      // still being written
    }
  }
  return 'no diagnostic report within 2 s (the main thread does not reach the event loop)';
}
