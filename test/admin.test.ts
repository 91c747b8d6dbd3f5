import t from 'tap';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { client, http } from './helpers/http.js';
import { CLI, platformFor, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';

const run = promisify(execFile);
let p: Platform;
let a: ReturnType<typeof admin>;

t.before(async () => {
  p = await platformFor(t);
  a = admin(p);
});

t.test('admin API needs the operator token', async (t) => {
  const none = await http(p.edge, 'GET', '/admin/v1/accounts');
  t.equal(none.status, 401);
  t.match(none.body, { message: String, errors: Array });
  t.equal((await http(p.edge, 'GET', '/admin/v1/accounts', { headers: { authorization: 'Bearer wrong-token-wrong-token' } })).status, 401);
  t.equal((await http(p.edge, 'GET', '/admin/v1/accounts', { headers: { authorization: p.operatorToken } })).status, 401, 'Bearer scheme required');
});

t.test('accounts: create with and without slug, list, conflicts, validation', async (t) => {
  const acme = await a('POST', '/accounts', { name: 'Acme Corp' });
  t.equal(acme.status, 201);
  t.match(acme.body, { id: /^acc_/, slug: 'acme-corp', name: 'Acme Corp', created_at: String });
  const second = await a('POST', '/accounts', { name: 'Acme Corp' });
  t.equal(second.body.slug, 'acme-corp-2', 'a derived slug is made unique');
  const explicit = await a('POST', '/accounts', { name: 'Initech', slug: 'initech' });
  t.equal(explicit.body.slug, 'initech');
  const taken = await a('POST', '/accounts', { name: 'Other', slug: 'initech' });
  t.equal(taken.status, 409);
  t.same(taken.body.errors.map((e: any) => e.field), ['slug']);
  for (const body of [{}, { name: '' }, { name: 'x'.repeat(129) }, { name: 'ok', slug: 'Bad Slug' }]) {
    const r = await a('POST', '/accounts', body);
    t.equal(r.status, 400);
    t.ok(r.body.errors.length > 0);
  }
  const list = await a('GET', '/accounts');
  t.ok(list.body.data.some((x: any) => x.id === acme.body.id));
});

t.test('keys: issued once, stored hashed, scoped, revocable at once', async (t) => {
  const acc = (await a('POST', '/accounts', { name: 'Keys Inc' })).body;
  const issued = await a('POST', '/keys', { account_id: acc.id, scope: 'agents' });
  t.equal(issued.status, 201);
  t.match(issued.body, { id: /^key_/, key: String, scope: 'agents', account_id: acc.id, project_id: null, permissions: [] });
  const api = client(p.edge, { 'x-api-key': issued.body.key });
  t.equal((await api('GET', '/v1/agents')).status, 200, 'the key works');
  const agent = (await api('POST', '/v1/agents', { name: 'Bot' })).body;

  t.equal((await a('POST', '/keys', { account_id: acc.id, scope: 'chat' })).status, 400, 'chat keys need a project');
  t.equal((await a('POST', '/keys', { account_id: acc.id, scope: 'conversations' })).status, 400);
  t.equal((await a('POST', '/keys', { account_id: acc.id, scope: 'external_events' })).status, 400);
  t.equal((await a('POST', '/keys', { account_id: acc.id, scope: 'root' })).status, 400);
  t.equal((await a('POST', '/keys', { account_id: 'acc_nope', scope: 'agents' })).status, 404);
  t.equal((await a('POST', '/keys', { account_id: acc.id, scope: 'chat', project_id: 'agent-nope' })).status, 404);
  const conv = await a('POST', '/keys', { account_id: acc.slug, scope: 'conversations', project_id: agent.agentId, permissions: ['conversations_data', 'pii'] });
  t.equal(conv.status, 201, 'account by slug');
  t.match(conv.body, { scope: 'conversations', project_id: agent.agentId, permissions: ['conversations_data', 'pii'] });
  t.equal((await a('POST', '/keys', { account_id: acc.id, scope: 'agents', permissions: ['admin'] })).status, 400);

  const listed = await a('GET', `/keys?account_id=${acc.id}`);
  t.equal(listed.body.data.length, 2);
  t.same((await a('GET', `/keys?account_id=${acc.slug}`)).body, listed.body, 'the account by its slug lists the same keys');
  t.equal((await a('GET', '/keys?account_id=acc_nope')).status, 404, 'an unknown account is not an empty list');
  t.notOk(JSON.stringify(listed.body).includes(issued.body.key), 'lists never show the key');
  t.notOk('hash' in listed.body.data[0]);

  const revoked = await a('DELETE', `/keys/${issued.body.id}`);
  t.equal(revoked.status, 204);
  t.equal((await api('GET', '/v1/agents')).status, 401, 'a revoked key stops working at once');
  t.equal((await a('DELETE', `/keys/${issued.body.id}`)).status, 404);

  // the secret is not in the data dir in any form but its hash
  const files = readdirSync(p.dataDir, { recursive: true }).map(String).filter((f) => statSync(join(p.dataDir, f)).isFile());
  // The secret is the key's last 32 characters (base64url: it may itself contain `_`).
  const secret = issued.body.key.slice(-32);
  for (const f of files) t.notOk(readFileSync(join(p.dataDir, f)).includes(secret), `${f} holds no key secret`);
});

t.test('connectors: kinds, environments, host rule, delete', async (t) => {
  const acc = (await a('POST', '/accounts', { name: 'Conn' })).body;
  const key = (await a('POST', '/keys', { account_id: acc.id, scope: 'agents' })).body.key;
  const agent = (await client(p.edge, { 'x-api-key': key })('POST', '/v1/agents', { name: 'Bot' })).body;
  const chat = await a('POST', '/connectors', { account_id: acc.id, project_id: agent.agentId, kind: 'chat' });
  t.equal(chat.status, 201);
  t.match(chat.body, { id: /^con_/, token: String, kind: 'chat', account_id: acc.id, project_id: agent.agentId, environment: 'live', variant_id: null, host: null });
  const variant = (await client(p.edge, { 'x-api-key': key })('POST', `/v1/agents/${agent.agentId}/branches/main/variants`, { name: 'Paris' })).body;
  const msg = await a('POST', '/connectors', { account_id: acc.id, project_id: agent.agentId, kind: 'messaging', environment: 'sandbox', host: 'Shop.Example.com', variant_id: variant.id });
  t.equal(msg.status, 201);
  t.match(msg.body, { environment: 'sandbox', host: 'shop.example.com', variant_id: variant.id });
  const unknown = await a('POST', '/connectors', { account_id: acc.id, project_id: agent.agentId, kind: 'chat', variant_id: 'var_nope' });
  t.same([unknown.status, unknown.body.errors], [400, [{ field: 'variant_id', message: 'no variant of this agent has this id (variants are defined on its main branch)' }]], 'a variant the agent does not have');
  t.equal((await a('POST', '/connectors', { account_id: acc.id, project_id: agent.agentId, kind: 'messaging' })).status, 400, 'messaging needs host');
  t.equal((await a('POST', '/connectors', { account_id: acc.id, project_id: agent.agentId, kind: 'chat', environment: 'prod' })).status, 400);
  t.equal((await a('POST', '/connectors', { account_id: acc.id, project_id: agent.agentId, kind: 'fax' })).status, 400);
  t.equal((await a('POST', '/connectors', { account_id: acc.id, project_id: agent.agentId, kind: 'messaging', host: 'https://x.com/path' })).status, 400);
  t.equal((await a('POST', '/connectors', { account_id: acc.id, project_id: 'agent-nope', kind: 'chat' })).status, 404);
  const list = await a('GET', `/connectors?account_id=${acc.id}`);
  t.equal(list.body.data.length, 2);
  t.same((await a('GET', `/connectors?account_id=${acc.slug}`)).body, list.body, 'the account by its slug lists the same connectors');
  t.equal((await a('GET', '/connectors?account_id=acc_nope')).status, 404, 'an unknown account is not an empty list');
  t.notOk(JSON.stringify(list.body).includes(chat.body.token));
  t.equal((await a('DELETE', `/connectors/${chat.body.id}`)).status, 204);
  t.equal((await a('DELETE', `/connectors/${chat.body.id}`)).status, 404);
  t.equal((await a('DELETE', `/connectors/${encodeURIComponent('bad id')}`)).status, 422);
});

t.test('optional fields may be sent as null, as the answers show them', async (t) => {
  const acc = (await a('POST', '/accounts', { name: 'Nulls' })).body;
  const key = await a('POST', '/keys', { account_id: acc.id, scope: 'agents', project_id: null });
  t.equal(key.status, 201, key.text);
  t.equal(key.body.project_id, null, 'an account-wide key');
  t.equal((await a('POST', '/keys', { account_id: acc.id, scope: 'chat', project_id: null })).status, 400, 'a chat key still needs its project');
  const agent = (await client(p.edge, { 'x-api-key': key.body.key })('POST', '/v1/agents', { name: 'Bot' })).body;
  const chat = await a('POST', '/connectors', { account_id: acc.id, project_id: agent.agentId, kind: 'chat', variant_id: null, host: null, telephony_connector_id: null, from_number: null });
  t.equal(chat.status, 201, chat.text);
  t.match(chat.body, { variant_id: null, host: null });
  t.equal((await a('POST', '/connectors', { account_id: acc.id, project_id: agent.agentId, kind: 'messaging', host: null })).status, 400, 'a messaging connector still needs its host');
});

t.test('project settings: defaults, patch, unknown project', async (t) => {
  const acc = (await a('POST', '/accounts', { name: 'Settings' })).body;
  const key = (await a('POST', '/keys', { account_id: acc.id, scope: 'agents' })).body.key;
  const agent = (await client(p.edge, { 'x-api-key': key })('POST', '/v1/agents', { name: 'Bot' })).body;
  const path = `/projects/${agent.agentId}/settings`;
  t.same((await a('GET', path)).body, { show_transcripts: true, chunked_streaming: false, pii_redaction: true });
  const patched = await a('PATCH', path, { show_transcripts: false, chunked_streaming: true });
  t.equal(patched.status, 200);
  t.same(patched.body, { show_transcripts: false, chunked_streaming: true, pii_redaction: true });
  t.same((await a('PATCH', path, { pii_redaction: false })).body, { show_transcripts: false, chunked_streaming: true, pii_redaction: false });
  t.same((await a('PATCH', path, { recording_retention_days: 7 })).body, { show_transcripts: false, chunked_streaming: true, pii_redaction: false, recording_retention_days: 7 }, 'recording retention per project (docs/recordings.md)');
  t.equal((await a('PATCH', path, { recording_retention_days: -1 })).status, 400);
  const cleared = await a('PATCH', path, { recording_retention_days: null });
  t.same(cleared.body, { show_transcripts: false, chunked_streaming: true, pii_redaction: false }, 'null gives the project back the deployment default');
  t.same((await a('GET', path)).body, cleared.body, 'and it stays so');
  t.same((await a('PATCH', path, { recording_retention_days: null, pii_redaction: true })).body, { show_transcripts: false, chunked_streaming: true, pii_redaction: true }, 'null beside another change');
  t.equal((await a('PATCH', path, { pii_redaction: null })).status, 400, 'only the retention can be cleared');
  t.equal((await a('PATCH', path, { show_transcripts: 'no' })).status, 400);
  t.equal((await a('PATCH', '/projects/agent-nope/settings', { show_transcripts: false })).status, 404);
});

t.test('the command-line client drives the admin API', async (t) => {
  const env = { ...process.env, SWITCHBOARD_URL: p.edge, OPERATOR_TOKEN: p.operatorToken };
  const cli = async (...args: string[]) => JSON.parse((await run(process.execPath, [CLI, ...args], { env })).stdout);
  const acc = await cli('accounts', 'create', '--name', 'Cli Co', '--slug', 'cli-co');
  t.match(acc, { slug: 'cli-co', name: 'Cli Co' });
  const key = await cli('keys', 'create', '--account', 'cli-co', '--scope', 'agents');
  t.match(key, { scope: 'agents', key: String });
  const agent = (await client(p.edge, { 'x-api-key': key.key })('POST', '/v1/agents', { name: 'Bot' })).body;
  const conn = await cli('connectors', 'create', '--account', acc.id, '--project', agent.agentId, '--kind', 'messaging', '--host', 'example.com', '--environment', 'sandbox');
  t.match(conn, { kind: 'messaging', host: 'example.com', environment: 'sandbox', token: String });
  t.same(await cli('settings', 'set', agent.agentId, '--chunked-streaming', 'true'), { show_transcripts: true, chunked_streaming: true, pii_redaction: true });
  t.ok((await cli('accounts', 'list')).data.some((x: any) => x.id === acc.id));
  t.equal((await cli('keys', 'list', '--account', acc.id)).data.length, 1);
  await run(process.execPath, [CLI, 'keys', 'revoke', key.id], { env });
  t.equal((await client(p.edge, { 'x-api-key': key.key })('GET', '/v1/agents')).status, 401);
  const failed = await run(process.execPath, [CLI, 'keys', 'create', '--account', acc.id, '--scope', 'chat'], { env }).catch((e) => e);
  t.equal(failed.code, 1, 'an API error exits 1');
  t.match(failed.stderr, /project_id/);
  const usage = await run(process.execPath, [CLI, 'bogus', 'thing'], { env }).catch((e) => e);
  t.equal(usage.code, 2, 'a usage error exits 2');
  const noToken = await run(process.execPath, [CLI, 'accounts', 'list'], { env: { ...env, OPERATOR_TOKEN: '' } }).catch((e) => e);
  t.equal(noToken.code, 2);
});
