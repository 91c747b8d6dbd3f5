/**
 * Credentials are cached in every serving process (`tenancy/cache.ts`), and revocation through the admin API
 * still takes effect at once everywhere: embedded (one process), and over NATS with two processes that each
 * serve the edge and the socket gateway, the admin calls made on one and the requests sent to the other
 * (whose cache was warmed first, so a missed invalidation would show as a 200), and a process cut off from NATS
 * while a key was revoked, which refuses it once it is back, long before its cache's TTL. Also: the cache is used (this
 * process's store reads through it, from `GET /admin/v1/runtime/tenancy-cache`, do not grow with requests),
 * and a key works at once after an unknown key was refused.
 */
import t, { type Test } from 'tap';
import { mkdtempSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, logged } from './helpers/eventually.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { http } from './helpers/http.js';
import { connect, is, messagingProject, T } from './helpers/messaging.js';
import { natsAvailable, startNats } from './helpers/nats.js';
import { platformFor, removeDir, startPlatform, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';

const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

type Caches = Record<'keys' | 'connectors' | 'accounts' | 'projects' | 'settings', { size: number; hits: number; misses: number; invalidations: number }>;

/** The tenancy cache counters of the process serving `p.edge`. */
async function caches(p: Platform): Promise<Caches> {
  const r = await admin(p)('GET', '/runtime/tenancy-cache');
  if (r.status !== 200) throw new Error(`tenancy-cache: ${r.status} ${r.text}`);
  return r.body.caches;
}

/**
 * Admin calls on `A`; Chat, Messaging and Conversations requests on `B` (the same process when embedded).
 * Every revocation is checked with the very next request, no waiting.
 */
async function revocationScenario(t: Test, A: Platform, B: Platform): Promise<void> {
  const m = await messagingProject(A, { name: 'Revoked Co' });
  const a = admin(A);
  const keyIds = (await a('GET', `/keys?account_id=${m.accountId}`)).body.data;
  const chatKeyId = keyIds.find((k: { scope: string }) => k.scope === 'chat').id;
  const connectorIds = (await a('GET', `/connectors?account_id=${m.accountId}`)).body.data;
  const chatConnectorId = connectorIds.find((c: { kind: string }) => c.kind === 'chat').id;
  const chat = (op: 'create' | 'respond', body: unknown, creds: { key?: string; token?: string } = {}) =>
    http(B.edge, 'POST', `/v1/${m.accountId}/${m.agentId}/chat/${op}`, { body, headers: { 'X-API-KEY': creds.key ?? m.chatKey, 'X-TOKEN': creds.token ?? m.token } });

  // Warm B's cache: key, connector, account, project.
  const created = await chat('create', {});
  t.equal(created.status, 200, created.text);
  const conversation = created.body.conversation_id;
  t.equal((await chat('respond', { conversation_id: conversation, message: 'When do you open?' })).status, 200);

  // The cache is used: further turns read none of these records from the store.
  const before = await caches(B);
  for (let i = 0; i < 4; i++) t.equal((await chat('respond', { conversation_id: conversation, message: 'Parking?' })).status, 200);
  const after = await caches(B);
  for (const c of ['keys', 'connectors', 'accounts', 'projects'] as const) {
    t.equal(after[c].misses, before[c].misses, `four chat turns read no ${c} from the store`);
  }
  t.ok(after.keys.hits - before.keys.hits >= 4 && after.connectors.hits - before.connectors.hits >= 4, 'they were served from the cache');

  // Messaging on B: a token, two sessions, a socket; the connector comes from the cache after the first read.
  const accessToken = await m.accessToken(B.socket);
  const s1 = await m.session({}, B.socket, accessToken);
  const beforeSessions = await caches(B);
  await m.session({}, B.socket, accessToken);
  t.equal((await caches(B)).connectors.misses, beforeSessions.connectors.misses, 'a session step reads no connector from the store');
  const socket = await connect(B.socket, { session_id: s1.sessionId, access_token: accessToken });
  t.teardown(() => socket.close());
  await socket.waitFor(is('EVENT_BATCH'));

  // Conversations API on B with settings read through the cache.
  const convKey = await conversationsKey(A, m);
  const list = conversationsClient({ ...A, edge: B.edge }, m, convKey);
  const since = new Date(Date.now() - 60_000).toISOString();
  const shown = await list({ start_time: since, include_latency: 'true' });
  t.equal(shown.status, 200, 'the list answers');
  t.ok(shown.body.conversations[0].turns.length > 0, 'transcripts shown');

  // An unknown key is refused; a key issued right after works at once.
  const unknown = `sbk_key_${'A'.repeat(16)}_${randomBytes(24).toString('base64url')}`;
  t.equal((await chat('respond', { conversation_id: conversation, message: 'hi' }, { key: unknown })).status, 401, 'an unknown key');
  const fresh = await a('POST', '/keys', { account_id: m.accountId, scope: 'chat', project_id: m.agentId });
  t.equal((await chat('respond', { conversation_id: conversation, message: 'hi' }, { key: fresh.body.key })).status, 200, 'a new key works at once');

  // Revocations, each checked by the very next request on B.
  t.equal((await a('DELETE', `/keys/${chatKeyId}`)).status, 204);
  const revokedKey = await chat('respond', { conversation_id: conversation, message: 'hi' });
  t.same([revokedKey.status, revokedKey.body], [401, { error_message: 'invalid X-API-KEY' }], 'a deleted key stops working at once');
  t.equal((await a('PATCH', `/projects/${m.agentId}/settings`, { show_transcripts: false })).status, 200);
  const hidden = await list({ start_time: since, include_latency: 'true' });
  t.same(hidden.body.conversations[0].turns, [], 'changed settings apply at once');
  t.equal((await a('DELETE', `/connectors/${chatConnectorId}`)).status, 204);
  const revokedToken = await chat('respond', { conversation_id: conversation, message: 'hi' }, { key: fresh.body.key });
  t.same([revokedToken.status, revokedToken.body], [401, { error_message: 'invalid X-TOKEN' }], 'a deleted chat connector stops working at once');

  t.equal((await a('DELETE', `/connectors/${m.connectorId}`)).status, 204);
  const tokenStep = await http(B.socket, 'POST', '/api/v1/access-token', { body: {}, headers: { 'X-Token': m.connectorToken, 'X-Host': `https://app.${m.host}` } });
  t.equal(tokenStep.status, 401, 'the deleted messaging connector gives no access token');
  t.equal((await http(B.socket, 'POST', '/api/v1/sessions', { body: {}, headers: { Authorization: `Bearer ${accessToken}` } })).status, 401, 'nor a session with a token it gave earlier');
  socket.send(T('REQUEST_SERVICE_AGENT_JOIN'), {}, { n: 1 });
  t.match(await socket.waitFor(is('SYSTEM_MESSAGE')), { payload: { message: 'Error: Connector not found' } }, 'an open socket of it can no longer join');
}

/**
 * A deployment over NATS for `t`: a nats-server and a data directory shared by the processes `start` adds, all
 * stopped (last started first) and removed when `t` ends. `restartNats` kills the server, runs `meanwhile`, and
 * starts it again on its port and store.
 */
async function natsDeployment(t: Test, extraEnv: Record<string, string> = {}) {
  const first = await startNats();
  let server = first;
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-revoke-'));
  const env = Object.assign({ NATS_URL: first.url, OPERATOR_TOKEN: `revoke-operator-${randomBytes(8).toString('hex')}`, LEASE_TTL_MS: '1500', SHARDS: '8' }, extraEnv);
  const started: Platform[] = [];
  t.teardown(async () => {
    for (const p of started.reverse()) await p.stop();
    await server.stop();
    removeDir(dataDir);
  });
  return {
    start: async (roles: string[]) => {
      const p = await startPlatform({ roles, dataDir, env });
      started.push(p);
      return p;
    },
    restartNats: async (meanwhile: () => Promise<void>) => {
      await server.kill();
      await meanwhile();
      server = await startNats({ port: first.port, storeDir: first.storeDir });
    },
  };
}

t.test('embedded (one process): revocation is immediate with the cache on', async (t) => {
  const p = await platformFor(t);
  await revocationScenario(t, p, p);
});

t.test('over NATS: the admin call on one process revokes at once on another', needsNats, async (t) => {
  const { start } = await natsDeployment(t);
  await start(['worker']);
  const A = await start(['edge', 'socket']);
  const B = await start(['edge', 'socket']);
  await eventually(async () => {
    const r = (await admin(A)('GET', '/runtime')).body;
    return r.unownedShards?.length === 0 && r.workers?.length === 1;
  }, 20_000, 'placement to settle', 50);
  await revocationScenario(t, A, B);
  const b = await caches(B);
  t.ok(b.keys.invalidations >= 1 && b.connectors.invalidations >= 2 && b.settings.invalidations >= 1, 'B applied the invalidations it was sent');
});

t.test('over NATS: a process cut off from NATS while a key was revoked drops its cache when it reconnects', needsNats, async (t) => {
  // A TTL far longer than the test: only the reconnect can make B read the key again.
  const { start, restartNats } = await natsDeployment(t, { TENANCY_CACHE_TTL_MS: '600000' });
  await start(['worker']);
  const A = await start(['edge']);
  const B = await start(['edge']);
  const m = await messagingProject(A, { name: 'Cut Off Co' });
  const issued = await admin(A)('POST', '/keys', { account_id: m.accountId, scope: 'conversations', project_id: m.agentId, permissions: ['conversations_data'] });
  t.equal(issued.status, 201, issued.text);
  const list = () => http(B.edge, 'GET', `/v3/${m.accountId}/${m.agentId}/conversations`, { headers: { 'x-api-key': issued.body.key } });
  t.equal((await list()).status, 200, 'B serves the key, and caches it');

  await restartNats(async () => {
    t.equal((await admin(A)('DELETE', `/keys/${issued.body.id}`)).status, 204, 'the key is revoked while NATS is down');
    // A's broadcast waits in its connection's buffer: A is gone before it could be sent.
    A.child.kill('SIGKILL');
  });

  await eventually(async () => (await list()).status === 401, 30_000, 'B to refuse the revoked key once it is back on NATS', 100);
  t.pass('B refuses the revoked key without waiting for its cache TTL');
  t.ok(await logged(() => B.stdout(), 'tenancy cache dropped: reconnected to NATS'), 'and says why it dropped its cache');
});
