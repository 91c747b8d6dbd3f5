import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { SealedSecret } from './endpoints.js';

const FILE = 'webhook-secrets.key';

/**
 * Seals and opens endpoints' signing secrets (AES-256-GCM). A signing secret cannot be stored as a hash like
 * API keys: every delivery needs it to compute the HMAC. Encrypting it keeps a copy of the store (a backup,
 * a dump of the MongoDB collection) from yielding secrets without the key, which lives apart from the data:
 * `WEBHOOK_SECRETS_KEY` (base64 of 32 bytes; every process of a deployment must share it) or, when unset,
 * a key file made once in the data dir (mode 0600).
 */
export class SecretBox {
  private constructor(private readonly key: Buffer) {}

  /** A box over a 32-byte key. */
  static fromKey(key: Buffer): SecretBox {
    if (key.length !== 32) throw new Error('WEBHOOK_SECRETS_KEY must be the base64 of 32 bytes');
    return new SecretBox(key);
  }

  /** The configured key, or the data dir's (created exclusively, so processes starting together agree). */
  static async open(dataDir: string, configured?: string): Promise<SecretBox> {
    if (configured) return SecretBox.fromKey(Buffer.from(configured, 'base64'));
    const file = join(dataDir, FILE);
    const existing = await readKey(file);
    if (existing) return SecretBox.fromKey(existing);
    await mkdir(dataDir, { recursive: true });
    const key = randomBytes(32);
    try {
      await writeFile(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return SecretBox.fromKey((await readKey(file))!);
      throw err;
    }
    return SecretBox.fromKey(key);
  }

  seal(secret: string): SealedSecret {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return { iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
  }

  /** The secret; throws when the key is not the one it was sealed with. */
  open(sealed: SealedSecret): string {
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(sealed.iv, 'base64'));
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]).toString('utf8');
  }
}

async function readKey(file: string): Promise<Buffer | null> {
  try {
    const key = Buffer.from((await readFile(file, 'utf8')).trim(), 'base64');
    return key.length === 32 ? key : null;
  } catch {
    return null;
  }
}
