import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { hashSecret } from './secrets.js';

const FILE = 'operator-token.sha256';

/**
 * The SHA-256 of the admin API's bearer token. `OPERATOR_TOKEN` wins when set; otherwise a token is made on
 * the first start, its hash kept in `DATA_DIR`, and the token itself printed once (it is never stored).
 * Several processes starting together on one data dir agree on one token: the file is created exclusively.
 */
export async function operatorTokenHash(dataDir: string, configured: string | undefined, print: (line: string) => void): Promise<string> {
  if (configured) return hashSecret(configured);
  const file = join(dataDir, FILE);
  const existing = await readHash(file);
  if (existing) return existing;
  await mkdir(dataDir, { recursive: true });
  const token = `sbo_${randomBytes(24).toString('base64url')}`;
  try {
    await writeFile(file, `${hashSecret(token)}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return (await readHash(file))!;
    throw err;
  }
  print(`Generated the operator token (shown once; only its hash is kept in ${file}):`);
  print(`OPERATOR_TOKEN=${token}`);
  return hashSecret(token);
}

async function readHash(file: string): Promise<string | null> {
  try {
    const text = (await readFile(file, 'utf8')).trim();
    return /^[0-9a-f]{64}$/.test(text) ? text : null;
  } catch {
    return null;
  }
}
