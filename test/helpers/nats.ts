import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

/** A nats-server child process with JetStream, listening on loopback. */
export interface NatsServer {
  url: string;
  port: number;
  /** JetStream store directory; pass it back to `startNats` to restart on the same data. */
  storeDir: string;
  process: ChildProcess;
  /** The server's log so far (stderr and stdout). */
  output(): string;
  /** SIGTERM and wait for exit: a clean shutdown, the store stays for a restart. */
  stop(): Promise<void>;
  /** SIGKILL and wait for exit: a crash. */
  kill(): Promise<void>;
}

export interface StartNatsOptions {
  /** Listen on this port (e.g. to restart a stopped server where its clients reconnect); default a free one. */
  port?: number;
  /** JetStream store directory (e.g. a stopped server's); default a fresh temporary directory. */
  storeDir?: string;
  /** More nats-server arguments (e.g. `--user`, `--pass`). */
  args?: string[];
}

// Debian installs nats-server in /usr/sbin, which is not on every user's PATH.
const EXTRA_DIRS = ['/usr/sbin', '/usr/local/sbin'];

/** The nats-server binary: `$NATS_SERVER`, else the first on PATH (or in the sbin directories), else null. */
export function natsServerPath(): string | null {
  const candidates = process.env.NATS_SERVER
    ? [process.env.NATS_SERVER]
    : [...(process.env.PATH ?? '').split(delimiter), ...EXTRA_DIRS].filter(Boolean).map((d) => join(d, 'nats-server'));
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // not here
    }
  }
  return null;
}

/**
 * Whether NATS tests can run. Without nats-server they may be skipped locally, but in CI
 * (`CI=true`) a missing server must fail the run rather than silently skip it, so this throws there.
 */
export function natsAvailable(): boolean {
  if (natsServerPath()) return true;
  if (process.env.CI === 'true') {
    throw new Error('nats-server is not installed (CI=true): install it (apt-get install nats-server) or set NATS_SERVER');
  }
  return false;
}

const running = new Set<ChildProcess>();
const createdDirs = new Set<string>();
let exitHookInstalled = false;

// A failed test must not leave servers or stores behind.
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of running) child.kill('SIGKILL');
    for (const dir of createdDirs) rmSync(dir, { recursive: true, force: true });
  });
}

/** A port that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function spawnServer(bin: string, port: number, storeDir: string, args: string[] = []): Promise<NatsServer> {
  const child = spawn(bin, ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', storeDir, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let log = '';
  const append = (d: Buffer) => {
    log += d.toString();
    if (log.length > 1 << 20) log = log.slice(-(1 << 19));
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      running.delete(child);
      resolve();
    }),
  );
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`nats-server exited on start (port ${port}):\n${log}`);
    }
    // "Server is ready" comes after JetStream is up; the connect check alone could race it.
    if (log.includes('Server is ready') && (await canConnect(port))) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`nats-server did not accept connections on port ${port} in time:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
      const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(force);
    }
  };
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    process: child,
    output: () => log,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
  };
}

/**
 * Starts `nats-server -js` on 127.0.0.1 and waits until it is ready. Throws when nats-server is missing:
 * call `natsAvailable()` first to skip instead. Servers still running when the process exits are killed
 * and the temporary stores this helper created are removed.
 */
export async function startNats(options: StartNatsOptions = {}): Promise<NatsServer> {
  const bin = natsServerPath();
  if (!bin) throw new Error('nats-server is not installed: install it (apt-get install nats-server) or set NATS_SERVER');
  installExitHook();
  let storeDir = options.storeDir;
  if (!storeDir) {
    storeDir = mkdtempSync(join(tmpdir(), 'sb-nats-'));
    createdDirs.add(storeDir);
  }
  if (options.port !== undefined) return spawnServer(bin, options.port, storeDir, options.args);
  // Another process may take the free port before the server binds it: try a few.
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await spawnServer(bin, await freePort(), storeDir, options.args);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}
