/**
 * How a sandbox process is started: the OS layers around it, beyond QuickJS itself.
 *
 * Layers, strongest first, taken when the OS allows them:
 *  - `bwrap` (Debian's `bubblewrap`, started as uid 65534 when the platform is root, which needs unprivileged user
 *    namespaces): new user, PID, network, IPC and UTS namespaces, uid/gid 65534 inside and out, a read-only
 *    root holding only `/usr` (with the `/lib`, `/lib64`, `/bin` links), the Node binary, the compiled platform
 *    code and `node_modules`; fresh `/proc`, `/dev` and an empty `/tmp`; killed with its parent.
 *  - `unshare` (util-linux, as root): new network, PID, IPC and UTS namespaces, uid/gid 65534; the filesystem
 *    stays visible under the unprivileged uid's permissions.
 *  - `uid` (root without either tool): uid/gid 65534 only.
 *  - `none`: an ordinary child process.
 * Every layer starts the process with an empty environment, `/` as its working directory (never `DATA_DIR`) and
 * only its three pipes as descriptors. Node opens its own descriptors close-on-exec, but native code need not:
 * LMDB opens the store's files without it, so a child would inherit read-write handles on `store.mdb` and
 * `read-models.mdb`. Every descriptor that would be inherited is closed before the launch command runs
 * (`platform/inherited-descriptors.ts`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, existsSync, lstatSync, readFileSync, readlinkSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { canCloseInherited, withoutInherited } from '../../platform/inherited-descriptors.js';

export type IsolationLayer = 'bwrap' | 'unshare' | 'uid' | 'none';

/** What the chosen layer provides and what is missing, for the one log line at start. */
export interface IsolationReport {
  layer: IsolationLayer;
  missing: string[];
}

const NOBODY = 65534;
/** The compiled root (dist/) and the repository root holding package.json and node_modules. */
const DIST = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const ROOT = dirname(DIST);
export const CHILD_SCRIPT = join(DIST, 'actors', 'functions', 'child.js');

function which(name: string): string | null {
  for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(delimiter)) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

const isRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;
/**
 * Whether bwrap itself is started as 65534 when we are root. It needs unprivileged user namespaces and a path to
 * the platform's code that 65534 may traverse; where it cannot, bwrap runs as root (the process is still 65534
 * inside its namespace, but not outside it), and the report says so.
 */
let bwrapAsNobody = true;

/** bwrap's arguments for a read-only root with just what Node and the child script need. */
function bwrapArgs(): string[] {
  const args = ['--unshare-all', '--die-with-parent', '--new-session', '--clearenv', '--uid', String(NOBODY), '--gid', String(NOBODY)];
  args.push('--ro-bind', '/usr', '/usr');
  for (const top of ['/lib', '/lib64', '/bin', '/lib32', '/libx32']) {
    if (!existsSync(top)) continue;
    const st = lstatSync(top);
    if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(top), top);
    else args.push('--ro-bind', top, top);
  }
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
  const node = process.execPath;
  if (!node.startsWith('/usr/')) args.push('--ro-bind', node, node);
  // The code the child runs, and package.json for its module type; never the data directory.
  args.push('--ro-bind', DIST, DIST, '--ro-bind', join(ROOT, 'node_modules'), join(ROOT, 'node_modules'));
  if (existsSync(join(ROOT, 'package.json'))) args.push('--ro-bind', join(ROOT, 'package.json'), join(ROOT, 'package.json'));
  // Last, once every mount point is made in it: the root itself (bwrap's tmpfs) read-only too; /tmp stays writable.
  args.push('--remount-ro', '/', '--chdir', '/');
  return args;
}

/** V8's own stack limit by default, in KiB. */
const V8_DEFAULT_STACK_KB = 984;
/** The most a sandbox process's V8 stack is given, in KiB (see `hostStackKb`). */
const MAX_HOST_STACK_KB = 6000;

/**
 * The V8 stack limit for sandbox processes, from this process's OS stack limit (which they inherit), less 2 MiB
 * of margin. Why larger than V8's default: QuickJS checks its stack limit against its shadow stack in WebAssembly
 * memory, while the interpreter's native frames use the host's stack, several times as much on some paths
 * (JSON, `String()` of nested arrays). With this much host stack, those paths end in QuickJS's own stack
 * overflow at `MAX_STACK_KB`; what is still deeper (parsing deeply nested source) overflows the host stack, which
 * the process contains: the call fails and the process is replaced.
 */
export function hostStackKb(): number {
  try {
    const line = /^Max stack size\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1];
    if (line === 'unlimited') return MAX_HOST_STACK_KB;
    const kb = Math.floor(Number(line) / 1024) - 2048;
    return Number.isFinite(kb) ? Math.max(V8_DEFAULT_STACK_KB, Math.min(MAX_HOST_STACK_KB, kb)) : V8_DEFAULT_STACK_KB;
  } catch {
    return V8_DEFAULT_STACK_KB;
  }
}

let nodeArgsRead: string[] | null = null;
/** Node's arguments for a sandbox process; read once, when the first process starts (not when imported). */
const sandboxNodeArgs = (): string[] => (nodeArgsRead ??= [`--stack-size=${hostStackKb()}`]);

interface Launch {
  command: string;
  args: string[];
  uid?: number;
  gid?: number;
}

function launchFor(layer: IsolationLayer, script: string, scriptArgs: string[]): Launch {
  const node = process.execPath;
  switch (layer) {
    case 'bwrap':
      // Started as 65534 when we are root, so the process is unprivileged outside its user namespace too.
      return { command: which('bwrap')!, args: [...bwrapArgs(), node, ...sandboxNodeArgs(), script, ...scriptArgs], ...(isRoot() && bwrapAsNobody ? { uid: NOBODY, gid: NOBODY } : {}) };
    case 'unshare':
      return {
        command: which('unshare')!,
        args: ['--net', '--ipc', '--uts', '--pid', '--fork', '--kill-child', '--setuid', String(NOBODY), '--setgid', String(NOBODY), '--', node, ...sandboxNodeArgs(), script, ...scriptArgs],
      };
    case 'uid':
      return { command: node, args: [...sandboxNodeArgs(), script, ...scriptArgs], uid: NOBODY, gid: NOBODY };
    case 'none':
      return { command: node, args: [...sandboxNodeArgs(), script, ...scriptArgs] };
  }
}

/** Starts the child script under `layer`, with `args` and pipes on stdin, stdout and stderr, and no other descriptor of ours. */
export function launch(layer: IsolationLayer, args: string[]): ChildProcess {
  const l = launchFor(layer, CHILD_SCRIPT, args);
  const { command, args: argv } = withoutInherited(l.command, l.args);
  return spawn(command, argv, { env: {}, cwd: '/', stdio: ['pipe', 'pipe', 'pipe'], uid: l.uid, gid: l.gid, detached: false });
}

/** Runs `node -e 0` under a layer: whether the OS lets this process use it. */
function works(layer: IsolationLayer): Promise<boolean> {
  return new Promise((resolve) => {
    let child: ChildProcess;
    try {
      const l = launchFor(layer, '-e', ['0']);
      child = spawn(l.command, l.args, { env: {}, cwd: '/', stdio: 'ignore', uid: l.uid, gid: l.gid });
    } catch {
      resolve(false);
      return;
    }
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve(false);
    }, 10_000);
    child.once('error', () => {
      clearTimeout(timer);
      resolve(false);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code === 0);
    });
  });
}

const ORDER: IsolationLayer[] = ['bwrap', 'unshare', 'uid', 'none'];
const GIVES: Record<IsolationLayer, string[]> = {
  bwrap: ['read-only minimal filesystem', 'no network', 'unprivileged uid'],
  unshare: ['no network', 'unprivileged uid'],
  uid: ['unprivileged uid'],
  none: [],
};

function available(layer: IsolationLayer): boolean {
  switch (layer) {
    case 'bwrap':
      return which('bwrap') !== null;
    case 'unshare':
      return isRoot() && which('unshare') !== null;
    case 'uid':
      return isRoot();
    case 'none':
      return true;
  }
}

/**
 * Picks the strongest layer that works here (`auto`), or checks the one asked for (which must work: an operator
 * who names a layer does not get a weaker one silently).
 */
export async function chooseIsolation(wanted: IsolationLayer | 'auto'): Promise<IsolationReport> {
  const candidates = wanted === 'auto' ? ORDER : [wanted];
  for (const layer of candidates) {
    if (!available(layer)) continue;
    bwrapAsNobody = true;
    // Without bash, descriptors opened without close-on-exec (LMDB's) would reach the sandbox processes.
    const descriptors = canCloseInherited() ? [] : ['no inherited descriptors (needs /bin/bash)'];
    if (await works(layer)) {
      const missing = GIVES.bwrap.filter((g) => !GIVES[layer].includes(g));
      return { layer, missing: [...missing, ...descriptors] };
    }
    if (layer === 'bwrap' && isRoot()) {
      bwrapAsNobody = false;
      if (await works(layer)) return { layer, missing: ['unprivileged uid outside its user namespace', ...descriptors] };
    }
  }
  throw new Error(`the function sandbox isolation "${wanted}" is not available on this machine`);
}
