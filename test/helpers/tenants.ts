import { http } from './http.js';
import type { Platform } from './platform.js';

/** Admin API calls with the platform's operator token. */
export function admin(p: Platform) {
  return (method: string, path: string, body?: unknown) =>
    http(p.edge, method, `/admin/v1${path}`, { body, headers: { authorization: `Bearer ${p.operatorToken}` } });
}

/** Creates an account and an `agents` key for it; returns their ids and the key. */
export async function tenant(p: Platform, name = 'Acme'): Promise<{ accountId: string; key: string; keyId: string }> {
  const a = admin(p);
  const account = await a('POST', '/accounts', { name });
  if (account.status !== 201) throw new Error(`account: ${account.status} ${account.text}`);
  const key = await a('POST', '/keys', { account_id: account.body.id, scope: 'agents' });
  if (key.status !== 201) throw new Error(`key: ${key.status} ${key.text}`);
  return { accountId: account.body.id, key: key.body.key, keyId: key.body.id };
}
