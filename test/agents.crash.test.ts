import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Store } from '../store/mod.js';
import { builderRecords, type BuilderRecords } from '../builder/records.js';
import { client } from './helpers/http.js';
import { removeDir, startPlatform, startPlatformWithStore, type Platform } from './helpers/platform.js';
import { tenant } from './helpers/tenants.js';

// An agent is stored with its main branch or not at all, as the client sees it: a create a crash interrupts
// between storing the agent and its main branch leaves an agent whose main the next read stores.

let p: Platform;
let store: Store;
let records: BuilderRecords;
let api: ReturnType<typeof client>;
let accountId: string;

t.before(async () => {
  ({ p, store } = await startPlatformWithStore());
  records = builderRecords(store);
  const a = await tenant(p, 'Acme');
  accountId = a.accountId;
  api = client(p.edge, { 'x-api-key': a.key });
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

/** What a crash between the two writes of a create leaves: the agent record, and no branch. */
async function agentWithoutMain(agentId: string): Promise<void> {
  const now = new Date().toISOString();
  await records.agents.insert({ id: agentId, account_id: accountId, name: 'Half made', slug: agentId, description: '', created_at: now, updated_at: now, deployment_seq: 0 });
}

t.test('an agent a crash left without its main branch has one at the first read, and everything works on it', async (t) => {
  const listed = `half-${Date.now()}`;
  await agentWithoutMain(listed);
  const row = (await api('GET', '/v1/agents')).body.agents.find((a: any) => a.agentId === listed);
  t.equal(row?.branchCount, 1, 'listed with its main branch');
  t.equal((await api('GET', `/v1/agents/${listed}/branches`)).body.branches.length, 1, 'which is there');

  const edited = `half-edit-${Date.now()}`;
  await agentWithoutMain(edited);
  const behavior = await api('PATCH', `/v1/agents/${edited}/branches/main/behavior`, { behavior: 'answer politely' });
  t.equal(behavior.status, 200, behavior.text);
  t.equal((await api('GET', `/v1/agents/${edited}`)).body.branchCount, 1);
  t.equal((await api('POST', `/v1/agents/${edited}/branches`, { name: 'feat' })).status, 201, 'a branch is cut from it');
  const published = await api('POST', `/v1/agents/${edited}/deployments/publish`, {});
  t.equal(published.status, 200, published.text);
  const branches = (await api('GET', `/v1/agents/${edited}/branches`)).body.branches;
  t.same(branches.map((b: any) => b.name), ['main', 'feat'], 'main first, once');

  const branched = `half-branch-${Date.now()}`;
  await agentWithoutMain(branched);
  t.equal((await api('POST', `/v1/agents/${branched}/branches`, { name: 'feat' })).status, 201, 'cutting a branch first settles main too');
  const retried = await api('POST', '/v1/agents', { name: 'Half made', agentId: branched });
  t.equal(retried.status, 409, 'a retried create meets the agent, which is whole');
  t.equal((await api('GET', `/v1/agents/${branched}/branches/main`)).status, 200);

  // Settled by many reads at once: one main branch.
  const raced = `half-race-${Date.now()}`;
  await agentWithoutMain(raced);
  await Promise.all(Array.from({ length: 8 }, () => api('GET', `/v1/agents/${raced}/branches/main`)));
  t.equal(await records.branches.count({ agent_id: raced }), 1, 'reads at once store one main');
});

t.test('creates while the platform is killed (SIGKILL): after the restart every listed agent has its main branch', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-test-'));
  const env = { OPERATOR_TOKEN: `test-operator-crash-${Date.now()}` };
  t.teardown(() => removeDir(dataDir));
  const first = await startPlatform({ dataDir, env });
  const key = (await tenant(first, 'Killed')).key;
  const exited = new Promise((resolve) => first.child.once('exit', resolve));
  let killed = false;
  let answered = 0;
  // The process is killed once a fifth of the creates have answered, with the others under way.
  const creates = Array.from({ length: 200 }, async (_, i) => {
    const r = await client(first.edge, { 'x-api-key': key })('POST', '/v1/agents', { name: `Killed ${i}`, agentId: `killed-${i}` }).catch(() => null);
    if (r?.status === 201 && ++answered === 40) {
      killed = true;
      first.child.kill('SIGKILL');
    }
  });
  await Promise.all(creates);
  await exited;
  t.ok(killed, 'killed mid-creates');

  const second = await startPlatform({ dataDir, env });
  t.teardown(() => second.stop());
  const after = client(second.edge, { 'x-api-key': key });
  const agents = (await after('GET', '/v1/agents')).body.agents as any[];
  t.ok(agents.length > 0, `${agents.length} stored`);
  t.same(agents.filter((a) => a.branchCount < 1).map((a) => a.agentId), [], 'each listed with its main branch');
  for (const a of agents) {
    const main = await after('GET', `/v1/agents/${a.agentId}/branches/main`);
    if (main.status !== 200) t.fail(`${a.agentId}: main ${main.status}`);
  }
  const stored = new Set(agents.map((a) => a.agentId));
  const missing = Array.from({ length: 200 }, (_, i) => `killed-${i}`).find((id) => !stored.has(id));
  if (missing) t.equal((await after('POST', '/v1/agents', { name: 'Again', agentId: missing })).status, 201, 'an id the crash did not store is free');
});
