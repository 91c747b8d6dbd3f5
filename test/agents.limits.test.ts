import t from 'tap';
import { client } from './helpers/http.js';
import { platformFor, type Platform } from './helpers/platform.js';
import { tenant } from './helpers/tenants.js';

// What an account stores through the Agents API is bounded where each write could otherwise grow it without end:
// a real-time config page (each patch merges into it), a branch's content (each topic adds to it). Past the
// bound, every read and write of the thing, on threads other accounts share, grew as slow as it was large. So
// did an account's agents, which the unpaginated list answers all of.

let p: Platform;
let api: ReturnType<typeof client>;

t.before(async () => {
  p = await platformFor(t);
  api = client(p.edge, { 'x-api-key': (await tenant(p, 'Acme')).key });
});

async function newAgent(name = 'Limits') {
  const r = await api('POST', '/v1/agents', { name });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.agentId as string;
}

const KIB = 1024;

t.test('real-time configs: a patch whose merged page would pass 256 KiB is refused as an oversized patch is, and the page is unchanged', async (t) => {
  const agentId = await newAgent();
  const page = `/v1/agents/${agentId}/real-time-configs/live`;
  // Each value 100 KiB: every patch is well within the limit, three of them merged are not.
  const value = 'v'.repeat(100 * KIB);
  t.equal((await api('PATCH', `${page}/variables`, { variables: { a: value } })).status, 200);
  t.equal((await api('PATCH', `${page}/variables`, { variables: { b: value } })).status, 200);
  const before = (await api('GET', page)).body.variables;
  t.same(Object.keys(before), ['a', 'b']);

  const oversized = await api('PATCH', `${page}/variables`, { variables: { big: 'v'.repeat(257 * KIB) } });
  const merged = await api('PATCH', `${page}/variables`, { variables: { c: value } });
  t.equal(merged.status, 400, 'the third patch, merged, would be 300 KiB');
  t.equal(merged.status, oversized.status, 'the same status as a patch over the limit');
  t.type(merged.body.message, 'string');
  t.same(merged.body.errors, [{ field: 'variables', message: 'variables must be at most 256 KiB merged into the page' }]);
  t.same(oversized.body.errors.map((e: any) => e.field), ['variables'], 'the oversized patch names the same field');
  t.match(merged.body.message, /256 KiB/);
  t.same((await api('GET', page)).body.variables, before, 'the refused patch changed nothing');

  // Patches that keep the page within the limit still merge: a value replaced, a key removed, then a new one.
  t.equal((await api('PATCH', `${page}/variables`, { variables: { a: 'w'.repeat(100 * KIB) } })).status, 200, 'replacing a value is not adding to it');
  t.equal((await api('PATCH', `${page}/variables`, { variables: { a: null } })).status, 200);
  const after = await api('PATCH', `${page}/variables`, { variables: { c: value } });
  t.equal(after.status, 200, 'room again once a key is removed');
  t.same(Object.keys(after.body.variables).sort(), ['b', 'c']);
  // Each page is bounded on its own.
  t.equal((await api('PATCH', `/v1/agents/${agentId}/real-time-configs/shared/variables`, { variables: { a: value, b: value } })).status, 200);
});

// A topic holds up to 100,000 characters: the 8 MiB bound (8,388,608 bytes) is reached at the 84th such topic.
const TOPIC = 'lorem ipsum '.repeat(10_000).slice(0, 100_000);

/** Adds topics of 100,000 characters until one is refused (or `most` are taken); what was taken and the refusal. */
async function fill(base: string, most: number, prefix: string) {
  let taken = 0;
  for (; taken < most; taken++) {
    const r = await api('POST', `${base}/knowledge-base/topics`, { name: `${prefix}${taken}`, content: TOPIC });
    if (r.status !== 201) return { taken, refused: r };
  }
  return { taken, refused: null };
}

t.test('branches: a branch at its content bound refuses the next topic, and what would grow it, in the family shape', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}/branches/main`;
  await api('PATCH', `${base}/behavior`, { behavior: 'b'.repeat(1000) });
  const { taken, refused } = await fill(base, 90, 't');
  t.equal(taken, 83, '83 topics of 100,000 characters fit in 8 MiB, the 84th does not');
  t.equal(refused?.status, 400, refused?.text.slice(0, 300) ?? 'none refused');
  t.type(refused?.body.message, 'string');
  t.match(refused?.body.message, /8 MiB/);
  t.same(refused?.body.errors, [{ field: 'branch', message: 'the branch would be larger than 8 MiB' }]);
  const topics = (await api('GET', `${base}/knowledge-base/topics`)).body.topics;
  t.equal(topics.length, 83, 'the refused topic was not stored');

  // A small topic still fits; a longer behavior does not, nor a topic made longer.
  t.equal((await api('POST', `${base}/knowledge-base/topics`, { name: 'small', content: 'x' })).status, 201);
  t.equal((await api('PATCH', `${base}/behavior`, { behavior: 'b'.repeat(100_000) })).status, 400, 'a longer behavior is refused');
  const shortTopic = topics[0];
  t.equal((await api('PATCH', `${base}/knowledge-base/topics/${shortTopic.id}`, { content: 'short' })).status, 200, 'shrinking a topic is taken');
  const grown = await api('PATCH', `${base}/knowledge-base/topics/${shortTopic.id}`, { content: TOPIC });
  t.equal(grown.status, 200, 'its room back');
  t.equal((await api('POST', `${base}/knowledge-base/topics`, { name: 'one more', content: TOPIC })).status, 400, 'and no more');
  t.equal((await api('DELETE', `${base}/knowledge-base/topics/${shortTopic.id}`)).status, 204, 'deleting is taken');
  t.equal((await api('POST', `${base}/knowledge-base/topics`, { name: 'one more', content: TOPIC })).status, 201, 'the room it freed is there');
});

t.test('branches: a merge that would take main past the bound is refused, main unchanged, the branch still open', async (t) => {
  const agentId = await newAgent();
  const branches = `/v1/agents/${agentId}/branches`;
  const feat = await api('POST', branches, { name: 'feat' });
  t.equal(feat.status, 201);
  t.equal((await fill(`${branches}/feat`, 45, 'f')).taken, 45);
  t.equal((await fill(`${branches}/main`, 45, 'm')).taken, 45, 'each side holds half the bound and more');
  const merge = await api('POST', `${branches}/${feat.body.branchId}/merge`, {});
  t.equal(merge.status, 400, merge.text.slice(0, 300));
  t.same(merge.body.errors, [{ field: 'branch', message: 'the branch would be larger than 8 MiB' }]);
  t.equal((await api('GET', `${branches}/main/knowledge-base/topics`)).body.topics.length, 45, 'main holds none of the branch');
  t.equal((await api('GET', `${branches}/feat`)).body.status, 'open', 'the branch is open again');
});

t.test('agents: an account at its agent limit (AGENTS_MAX_PER_ACCOUNT) creates no more; another account is not held by it', async (t) => {
  const small = await platformFor(t, { env: { AGENTS_MAX_PER_ACCOUNT: '3' } });
  const a = client(small.edge, { 'x-api-key': (await tenant(small, 'Acme')).key });
  const b = client(small.edge, { 'x-api-key': (await tenant(small, 'Globex')).key });
  for (const name of ['one', 'two', 'three']) t.equal((await a('POST', '/v1/agents', { name })).status, 201, name);
  const refused = await a('POST', '/v1/agents', { name: 'four' });
  t.equal(refused.status, 409, refused.text);
  t.same(refused.body, { message: 'an account may have at most 3 agents', errors: [{ field: 'agents', message: 'agent limit reached' }] });
  t.equal((await a('POST', '/v1/agents', { name: 'chosen', agentId: `chosen-${Date.now()}` })).status, 409, 'a chosen agentId too');
  t.same((await a('GET', '/v1/agents')).body.agents.map((x: any) => x.name), ['one', 'two', 'three'], 'none was stored');
  t.equal((await b('POST', '/v1/agents', { name: 'theirs' })).status, 201, 'the limit is per account');

  // Creates sent at once: each reads the count after the ones before it, so the burst stops at the bound.
  const c = client(small.edge, { 'x-api-key': (await tenant(small, 'Initech')).key });
  const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => c('POST', '/v1/agents', { name: `burst ${i}` })));
  t.same(burst.map((r) => r.status).sort(), [...Array(3).fill(201), ...Array(9).fill(409)], 'three created, the rest refused');
  t.equal((await c('GET', '/v1/agents')).body.agents.length, 3, 'three stored');
});
