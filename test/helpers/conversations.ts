import type { Test } from 'tap';
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

export type ConversationsReader = ReturnType<typeof conversationsClient>;

/**
 * Two readers of a chat project's conversations, with the `pii` permission and without, and a range from a second
 * ago to an hour on (fixed: a cursor is valid only for the filters it was issued with).
 */
export async function maskingReaders(p: Platform, c: ChatProject): Promise<{ masked: ConversationsReader; full: ConversationsReader; range: { start_time: string; end_time: string } }> {
  const masked = conversationsClient(p, c, await conversationsKey(p, c, ['conversations_data']));
  const full = conversationsClient(p, c, await conversationsKey(p, c, ['conversations_data', 'pii']));
  return { masked, full, range: { start_time: new Date(Date.now() - 1000).toISOString(), end_time: new Date(Date.now() + 3_600_000).toISOString() } };
}

/** The ids a v3 request over `range` returns, asserting it answered 200. */
export async function idsFound(t: Test, get: ConversationsReader, range: Record<string, string>, query: Record<string, string>): Promise<string[]> {
  const r = await get({ ...range, ...query });
  t.equal(r.status, 200, r.status === 200 ? 'answered' : r.text);
  return (r.body.conversations ?? []).map((x: { id: string }) => x.id);
}

/** A chat conversation of these user turns, each answered 200; closed (its row then a stored document) unless `open`. */
export async function chatConversation(c: ChatProject, messages: string[], open = false): Promise<string> {
  const id = (await c.chat('create', {})).body.conversation_id as string;
  for (const message of messages) {
    const r = await c.chat('respond', { conversation_id: id, message });
    if (r.status !== 200) throw new Error(`respond: ${r.status} ${r.text}`);
  }
  if (!open) await c.chat('close', { conversation_id: id });
  return id;
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
