import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * A worker id unique to this process: host, pid and a random suffix, so a restarted worker never mistakes
 * its predecessor's leases for its own. Only characters that are valid in KV keys and subjects.
 */
export function defaultWorkerId(): string {
  const host = hostname().replace(/[^A-Za-z0-9_-]/g, '-') || 'host';
  return `${host}-${process.pid}-${randomBytes(3).toString('hex')}`;
}
