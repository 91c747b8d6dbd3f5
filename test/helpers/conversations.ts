import { http, type Res } from './http.js';
import type { Platform } from './platform.js';
import type { ChatProject } from './chat.js';
import { admin } from './tenants.js';
import { waitForProjections } from './projections.js';

/** A `conversations` key for a chat project (with `conversations_data` unless `permissions` says otherwise). */
export async function conversationsKey(p: Platform, c: ChatProject, permissions: string[] = ['conversations_data'], projectId = c.agentId): Promise<string> {
  const r = await admin(p)('POST', '/keys', { account_id: c.accountId, scope: 'conversations', project_id: projectId, permissions });
  if (r.status !== 201) throw new Error(`key: ${r.status} ${r.text}`);
  return r.body.key;
}

/**
 * `GET /{version}/{account}/{project}/conversations[/concurrency]?<query>` with a key, once the projections
 * have caught up with the journal (the API may lag a turn by the projection lag: tests read after it).
 */
export function conversationsClient(p: Platform, c: ChatProject, key: string) {
  return async (query: string | Record<string, string | string[]> = '', opts: { version?: string; account?: string; project?: string; key?: string | null; path?: string } = {}): Promise<Res<any>> => {
    const qs = typeof query === 'string' ? query : toQuery(query);
    const headers: Record<string, string> = opts.key === null ? {} : { 'x-api-key': opts.key ?? key };
    const path = `/${opts.version ?? 'v3'}/${opts.account ?? c.accountId}/${opts.project ?? c.agentId}/conversations${opts.path ?? ''}${qs ? `?${qs}` : ''}`;
    await waitForProjections(p);
    return http(p.edge, 'GET', path, { headers });
  };
}

export function toQuery(query: Record<string, string | string[]>): string {
  const sp = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) for (const x of Array.isArray(v) ? v : [v]) sp.append(k, x);
  return sp.toString();
}

/**
 * An agent's functions that mark a member code as personal data (`conv.mark_pii`): masked for keys without
 * `pii` although no built-in rule knows it.
 */
export const MARKING_FUNCTIONS = {
  turn: `function turn(conv, message) {
    const m = /member code (\\w+)/.exec(message);
    if (m) conv.mark_pii(m[1]);
    return 'noted';
  }`,
};
