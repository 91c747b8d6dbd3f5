import { hash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

/** The base62 digits, in ASCII order (so base62 text of a fixed width sorts as its number). */
export const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A random string of base62 characters from a CSPRNG. */
export function randomBase62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[randomInt(BASE62.length)];
  return out;
}

/** A new resource id such as `acc_3kT9...`: a type prefix and 16 base62 characters. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(16)}`;
}

/** SHA-256 of a secret, hex. Secrets are long and random, so a fast unsalted hash is the right tool. */
export function hashSecret(secret: string): string {
  // The one-shot hash: no Hash object per call (every request verifies one or two credentials).
  return hash('sha256', secret, 'hex');
}

/** Constant-time check of a presented secret against a stored hash. */
export function secretMatches(presented: string, storedHash: string): boolean {
  // The digest as bytes, not through hex and back: every request checks one or two credentials.
  const a = hash('sha256', presented, 'buffer');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * A bearer credential that names its own record: `<prefix>_<recordId>_<secret>`. The record id lets the
 * server fetch one record and compare hashes in constant time instead of searching by secret.
 */
export function issueCredential(prefix: string, recordId: string): string {
  return `${prefix}_${recordId}_${randomBytes(24).toString('base64url')}`;
}

/** Splits a credential issued by `issueCredential`; null when it is not of that form. */
export function parseCredential(prefix: string, credential: string): { recordId: string } | null {
  if (!credential.startsWith(`${prefix}_`)) return null;
  const rest = credential.slice(prefix.length + 1);
  // record ids look like `key_XXXX`: two parts, then the secret, which may itself contain `_`.
  const m = /^([a-z]+_[A-Za-z0-9]{16})_([A-Za-z0-9_-]{32})$/.exec(rest);
  return m ? { recordId: m[1] } : null;
}
