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

// Within an account no name is one agent's id and another's slug: an `agentId: N` and a `name: N` created at the
// same moment are decided by a claim on N (builder/names.ts) that the store lets one of them insert.

t.test('a name another create has just claimed: the agentId is 409, the derived slug takes a suffix', async (t) => {
  // What a create under way at this moment holds: the claim, its agent not stored yet.
  const name = `inflight-${Date.now()}`;
  await records.nameClaims.insert({ id: `${accountId}/${name}`, account_id: accountId, name, agent_id: 'agent-underway', at: Date.now() });
  const chosen = await api('POST', '/v1/agents', { name: 'Chosen', agentId: name });
  t.equal(chosen.status, 409, chosen.text);
  t.match(chosen.body, { errors: [{ field: 'agentId', message: 'agentId is the slug of another agent' }] });
  const named = await api('POST', '/v1/agents', { name });
  t.equal(named.status, 201, named.text);
  t.equal(named.body.slug, `${name}-2`);
});

t.test('a claim a crashed create left (no agent, a minute old) is taken over: the name is not lost', async (t) => {
  const stale = Date.now() - 61_000;
  const id = `crashed-${Date.now()}`;
  await records.nameClaims.insert({ id: `${accountId}/${id}`, account_id: accountId, name: id, agent_id: 'agent-crashed', at: stale });
  const chosen = await api('POST', '/v1/agents', { name: 'Chosen', agentId: id });
  t.equal(chosen.status, 201, chosen.text);
  const slug = `crashed-slug-${Date.now()}`;
  await records.nameClaims.insert({ id: `${accountId}/${slug}`, account_id: accountId, name: slug, agent_id: 'agent-crashed-2', at: stale });
  t.equal((await api('POST', '/v1/agents', { name: slug })).body.slug, slug, 'a slug too');
  // A retried create of a chosen agentId meets its own claim, and goes on.
  const retried = `retried-${Date.now()}`;
  await records.nameClaims.insert({ id: `${accountId}/${retried}`, account_id: accountId, name: retried, agent_id: retried, at: Date.now() });
  t.equal((await api('POST', '/v1/agents', { name: 'Retried', agentId: retried })).status, 201, 'its own claim, however fresh');
});

t.test('many pairs at once, agentId N and name N: in every pair exactly one holds N, and N reaches it', async (t) => {
  const tag = `pair${Date.now()}`;
  const pairs = await Promise.all(
    Array.from({ length: 40 }, async (_, i) => {
      const n = `${tag}-${i}`;
      const [chosen, named] = await Promise.all([api('POST', '/v1/agents', { name: 'By id', agentId: n }), api('POST', '/v1/agents', { name: n })]);
      return { n, chosen, named };
    }),
  );
  for (const { n, chosen, named } of pairs) {
    t.equal(named.status, 201, `${n}: the named one is made`);
    const holders = (chosen.status === 201 ? 1 : 0) + (named.body.slug === n ? 1 : 0);
    if (holders !== 1) t.fail(`${n}: ${holders} agents hold it (agentId ${chosen.status}, slug ${named.body.slug})`);
    if (chosen.status !== 201) t.equal(chosen.status, 409, `${n}: the other is 409`);
    const reached = (await api('GET', `/v1/agents/${n}`)).body.agentId;
    t.equal(reached, chosen.status === 201 ? n : named.body.agentId, `${n}: reaches its holder`);
  }
});
