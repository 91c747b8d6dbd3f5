import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { hashSecret } from './secrets.js';

const FILE = 'operator-token.sha256';

/**
 * The SHA-256 of the admin API's bearer token. `OPERATOR_TOKEN` wins when set; otherwise a token is made on
 * the first start, its hash kept in `DATA_DIR`, and the token itself printed once (it is never stored).
 * Several processes starting together on one data dir agree on one token: the file is created exclusively.
 * A file that holds no hash (emptied or edited by hand) stops the start, naming it: serving the admin API
 * with no token that could match would make every call fail and tell the operator nothing.
 */
export async function operatorTokenHash(dataDir: string, configured: string | undefined, print: (line: string) => void): Promise<string> {
  if (configured) return hashSecret(configured);
  const file = join(dataDir, FILE);
  const existing = await readHash(file);
  if (existing !== 'absent') return existing ?? (await settledHash(file));
  await mkdir(dataDir, { recursive: true });
  const token = `sbo_${randomBytes(24).toString('base64url')}`;
  try {
    await writeFile(file, `${hashSecret(token)}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return settledHash(file);
    throw err;
  }
  print(`Generated the operator token (shown once; only its hash is kept in ${file}):`);
  print(`OPERATOR_TOKEN=${token}`);
  return hashSecret(token);
}

/** The hash in a file another process may be writing right now (created, not yet written): read again briefly. */
async function settledHash(file: string): Promise<string> {
  for (let i = 0; i < 20; i++) {
    const hash = await readHash(file);
    if (typeof hash === 'string' && hash !== 'absent') return hash;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(
    `${file} holds no SHA-256 of an operator token (64 hex digits): set OPERATOR_TOKEN, or delete the file to have a new token generated and printed`,
  );
}

/**
 * The hash a file holds (hex, either case, as `sha256sum` writes it too: the digest first), null when it holds
 * none, 'absent' when there is no file.
 */
async function readHash(file: string): Promise<string | null | 'absent'> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'absent';
    throw err;
  }
  const digest = text.trim().split(/\s+/)[0]!.toLowerCase();
  return /^[0-9a-f]{64}$/.test(digest) ? digest : null;
}
