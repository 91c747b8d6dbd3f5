/**
 * Settings the configuration cannot refuse by their text alone (`config.ts`) and the machine can: checked by
 * `start.ts` before anything opens, each failure naming its variable.
 */
import { constants } from 'node:fs';
import { access, mkdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { createServer } from 'node:net';

/** `getaddrinfo`'s answers for a name it could not resolve (none of them a fault of the listen itself). */
const UNRESOLVED = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA']);

/**
 * Stops the start, naming `HOST`, when the interface it names cannot be listened on: a name that does not
 * resolve, an address that is not this machine's. Checked by one listen on a free port of it before anything
 * opens, rather than at the first role's listen: the edge (in its thread), the socket gateway, the SIP stack
 * and the metrics server each failed with an error of their own (`getaddrinfo ENOTFOUND ...`, `listen
 * EADDRNOTAVAIL ...`) that said nothing of the setting.
 */
export async function checkHost(host: string): Promise<void> {
  const code = await new Promise<string | undefined>((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)));
    probe.listen({ host, port: 0 }, () => probe.close(() => resolve(undefined)));
  });
  if (code === undefined) return;
  const fix = 'set HOST to an address of this machine (127.0.0.1, 0.0.0.0 for every interface, ::) or a name that resolves to one';
  if (UNRESOLVED.has(code)) throw new Error(`HOST ${host} does not resolve (${code}); ${fix}`);
  if (code === 'EADDRNOTAVAIL') throw new Error(`HOST ${host} is not an address of this machine (EADDRNOTAVAIL); ${fix}`);
  throw new Error(`HOST ${host} cannot be listened on (${code}); ${fix}`);
}

/**
 * Makes `DATA_DIR` (as the embedded store would, a moment later) and stops the start, naming it, when it cannot be
 * made or written: a path under a regular file (`ENOTDIR`), a regular file itself (`EEXIST`), a directory this
 * process may not write. The store's own `mkdir` failed with an error that named the path but not the setting.
 */
export async function checkDataDir(dataDir: string): Promise<void> {
  try {
    await makeDir(resolve(dataDir));
    await access(dataDir, constants.W_OK | constants.X_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    const fix = 'set DATA_DIR to a directory this process can create and write';
    if (code === 'ENOTDIR') throw new Error(`DATA_DIR ${dataDir} cannot be created: part of its path is a file, not a directory (ENOTDIR); ${fix}`);
    if (code === 'EEXIST') throw new Error(`DATA_DIR ${dataDir} is a file, not a directory (EEXIST); ${fix}`);
    throw new Error(`DATA_DIR ${dataDir} cannot be created or written (${code}); ${fix}`);
  }
}

/**
 * `mkdir -p`, by hand: Node's `mkdir` with `recursive` never settles for a path under `/proc` (each try of the
 * path answers ENOENT and of its parent EEXIST, and it goes round again), so `DATA_DIR=/proc/x` hung the start
 * at full CPU, deaf to SIGTERM. Here each missing ancestor is made once, top down, and a path that is still
 * missing after its parent exists fails with its own error.
 */
async function makeDir(dir: string): Promise<void> {
  try {
    await mkdir(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') {
      if ((await stat(dir)).isDirectory()) return;
      throw err;
    }
    const parent = dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw err;
    await makeDir(parent);
    try {
      await mkdir(dir);
    } catch (again) {
      if ((again as NodeJS.ErrnoException).code !== 'EEXIST' || !(await stat(dir)).isDirectory()) throw again;
    }
  }
}
