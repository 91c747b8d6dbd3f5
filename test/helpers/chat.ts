import { client, http, type Res } from './http.js';
import type { Platform } from './platform.js';
import { admin, tenant } from './tenants.js';

export interface ChatProject {
  accountId: string;
  accountSlug: string;
  agentId: string;
  agentSlug: string;
  chatKey: string;
  token: string;
  /** The Agents API as the tenant. */
  api: ReturnType<typeof client>;
  /** Chat API calls with both credentials: `chat('create', body)`. */
  chat: (op: 'create' | 'respond' | 'close', body?: unknown, opts?: { token?: string; key?: string; account?: string; project?: string; version?: string }) => Promise<Res<any>>;
}

/**
 * An agent with behavior, topics and functions, published and promoted to live, with a chat key and a
 * live chat connector: what a Chat API client is handed by the operator.
 */
export async function chatProject(
  p: Platform,
  setup: { name?: string; functions?: Record<string, string>; topics?: Array<[string, string]>; behavior?: string; variants?: string[] } = {},
): Promise<ChatProject> {
  const tn = await tenant(p, setup.name ?? 'Chat Co');
  const api = client(p.edge, { 'x-api-key': tn.key });
  const created = await api('POST', '/v1/agents', { name: setup.name ?? 'Front Desk', description: 'chat' });
  const agentId = created.body.agentId;
  const base = `/v1/agents/${agentId}`;
  await api('PATCH', `${base}/branches/main/behavior`, { behavior: setup.behavior ?? 'Hello, welcome to Acme Dental! Be brief.' });
  for (const [name, content] of setup.topics ?? [['Opening hours', 'We are open from 9am to 5pm, Monday to Friday.'], ['Parking', 'Free parking is available behind the building.']]) {
    await api('POST', `${base}/branches/main/knowledge-base/topics`, { name, content });
  }
  for (const [name, code] of Object.entries(setup.functions ?? {})) {
    const r = await api('PUT', `${base}/branches/main/functions/${name}`, { code });
    if (r.status !== 200) throw new Error(`function ${name}: ${r.text}`);
  }
  for (const v of setup.variants ?? []) await api('POST', `${base}/branches/main/variants`, { name: v });
  const pub = await api('POST', `${base}/deployments/publish`, { environment: 'sandbox' });
  const pre = await api('POST', `${base}/deployments/${pub.body.deployment.id}/promote`);
  await api('POST', `${base}/deployments/${pre.body.deployment.id}/promote`);
  const a = admin(p);
  const key = await a('POST', '/keys', { account_id: tn.accountId, scope: 'chat', project_id: agentId });
  const connector = await a('POST', '/connectors', { account_id: tn.accountId, project_id: agentId, kind: 'chat', environment: 'live' });
  const accounts = (await a('GET', '/accounts')).body.data;
  const accountSlug = accounts.find((x: any) => x.id === tn.accountId).slug;
  const chat: ChatProject['chat'] = (op, body, opts = {}) =>
    http(p.edge, op === 'close' ? 'PUT' : 'POST', `/${opts.version ?? 'v1'}/${opts.account ?? tn.accountId}/${opts.project ?? agentId}/chat/${op}`, {
      body: body ?? {},
      headers: { 'X-API-KEY': opts.key ?? key.body.key, 'X-TOKEN': opts.token ?? connector.body.token },
    });
  return { accountId: tn.accountId, accountSlug, agentId, agentSlug: created.body.slug, chatKey: key.body.key, token: connector.body.token, api, chat };
}
