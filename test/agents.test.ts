import t from 'tap';
import { client, http } from './helpers/http.js';
import { platformFor, type Platform } from './helpers/platform.js';
import { admin, tenant } from './helpers/tenants.js';

let p: Platform;
let api: ReturnType<typeof client>;
let other: ReturnType<typeof client>;
let accountId: string;
let agentsKey: string;

t.before(async () => {
  p = await platformFor(t);
  const a = await tenant(p, 'Acme');
  accountId = a.accountId;
  agentsKey = a.key;
  api = client(p.edge, { 'x-api-key': a.key });
  const b = await tenant(p, 'Globex');
  other = client(p.edge, { 'x-api-key': b.key });
});

const isFieldError = (t: any, body: any) => {
  t.type(body.message, 'string', 'error has message');
  t.ok(Array.isArray(body.errors), 'error has errors[]');
  for (const e of body.errors ?? []) t.ok(typeof e.field === 'string' && typeof e.message === 'string', 'errors are {field, message}');
};

async function newAgent(name = 'Front desk') {
  const r = await api('POST', '/v1/agents', { name, description: 'answers the phone' });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.agentId as string;
}

t.test('agents: create, list, read; the main branch comes with it', async (t) => {
  const created = await api('POST', '/v1/agents', { name: 'Front desk', description: 'answers the phone' });
  t.equal(created.status, 201);
  t.match(created.body, { name: 'Front desk', agentName: 'Front desk', description: 'answers the phone', accountId, branchCount: 1, defaultBranch: 'main' });
  t.match(created.body.agentId, /^[A-Za-z0-9-]+$/);
  t.equal(created.body.branches[0].name, 'main');
  const noDescription = await api('POST', '/v1/agents', { name: 'x'.repeat(128) });
  t.equal(noDescription.status, 201, '128 characters is allowed; description defaults to empty');
  t.equal(noDescription.body.description, '');
  const list = await api('GET', '/v1/agents');
  t.equal(list.status, 200);
  t.ok(list.body.agents.some((a: any) => a.agentId === created.body.agentId));
  const one = await api('GET', `/v1/agents/${created.body.agentId}`);
  t.equal(one.status, 200);
  t.equal(one.body.name, 'Front desk');
});

t.test('agents: a chosen agentId, and branchName as the hosted service spells it', async (t) => {
  const chosen = `desk-${Date.now()}`;
  const r = await api('POST', '/v1/agents', { name: 'Chosen', agentId: chosen });
  t.equal(r.status, 201);
  t.equal(r.body.agentId, chosen);
  t.equal((await api('POST', '/v1/agents', { name: 'Again', agentId: chosen })).status, 409, 'a taken agentId is a conflict');
  t.equal((await other('POST', '/v1/agents', { name: 'Theirs', agentId: chosen })).status, 409, 'ids are unique across accounts');
  t.equal((await api('POST', '/v1/agents', { name: 'Bad', agentId: 'no spaces' })).status, 400);
  const racing = await Promise.all([1, 2, 3].map(() => api('POST', '/v1/agents', { name: 'Race', agentId: `${chosen}-race` })));
  t.same(racing.map((x) => x.status).sort(), [201, 409, 409], 'concurrent creates of one agentId: one wins');
  const branch = await api('POST', `/v1/agents/${chosen}/branches`, { branchName: 'via-branch-name' });
  t.equal(branch.status, 201);
  t.equal(branch.body.name, 'via-branch-name');
  const none = await api('POST', `/v1/agents/${chosen}/branches`, {});
  t.equal(none.status, 400);
  t.same(none.body.errors.map((e: any) => e.field), ['name']);
});

t.test('agents: name must be 1 to 128 characters; bad bodies are 400 in the error shape', async (t) => {
  for (const body of [{ name: '' }, { name: 'x'.repeat(129) }, {}, { name: 42 }, { name: 'ok', description: 7 }]) {
    const r = await api('POST', '/v1/agents', body);
    t.equal(r.status, 400, JSON.stringify(body).slice(0, 40));
    isFieldError(t, r.body);
  }
  const r = await api('POST', '/v1/agents', { name: '' });
  t.same(r.body.errors.map((e: any) => e.field), ['name']);
  t.equal(r.body.errors[0].message, 'name must be between 1 and 128 characters');
  const long = await api('POST', '/v1/agents', { name: 'ok', description: 'd'.repeat(4097) });
  t.same(long.body.errors, [{ field: 'description', message: 'description must be at most 4096 characters' }], 'too long is not "not a string"');
  const bad = await http(p.edge, 'POST', '/v1/agents', { raw: '{"name":', headers: { 'x-api-key': agentsKey, 'content-type': 'application/json' } });
  t.equal(bad.status, 400, 'unparseable JSON is 400');
  isFieldError(t, bad.body);
  const text = await http(p.edge, 'POST', '/v1/agents', { raw: 'name=x', headers: { 'x-api-key': agentsKey, 'content-type': 'text/plain' } });
  t.equal(text.status, 400, 'a body that is not JSON is 400 (contract 7.1 has no 415)');
  isFieldError(t, text.body);
  t.same(text.body, { message: 'Content-Type must be application/json, not text/plain', errors: [{ field: 'body', message: 'Content-Type must be application/json, not text/plain' }] });
  // As curl sends `-d` without a type: the form type.
  const form = await http(p.edge, 'POST', '/v1/agents', { raw: '{"name":"x"}', headers: { 'x-api-key': agentsKey, 'content-type': 'application/x-www-form-urlencoded' } });
  t.equal(form.status, 400);
});

t.test('auth: 401 without or with a bad key, 403 for another account or scope, invisible in lists', async (t) => {
  const agentId = await newAgent();
  const none = await http(p.edge, 'GET', '/v1/agents');
  t.equal(none.status, 401);
  isFieldError(t, none.body);
  t.equal((await http(p.edge, 'GET', '/v1/agents', { headers: { 'x-api-key': 'sbk_nope' } })).status, 401);
  t.equal((await other('GET', `/v1/agents/${agentId}`)).status, 403, 'another workspace: 403');
  t.equal((await other('PATCH', `/v1/agents/${agentId}/branches/main/behavior`, { behavior: 'x' })).status, 403);
  const theirs = await other('GET', '/v1/agents');
  t.notOk(theirs.body.agents.some((a: any) => a.agentId === agentId), "another account's agents are invisible");
  const chatKey = await admin(p)('POST', '/keys', { account_id: accountId, scope: 'chat', project_id: agentId });
  t.equal(chatKey.status, 201);
  t.equal((await http(p.edge, 'GET', '/v1/agents', { headers: { 'x-api-key': chatKey.body.key } })).status, 403, 'a chat key is not an agents key');
  const bound = await admin(p)('POST', '/keys', { account_id: accountId, scope: 'agents', project_id: agentId });
  const boundApi = client(p.edge, { 'x-api-key': bound.body.key });
  const otherAgent = await newAgent('Other');
  t.equal((await boundApi('GET', `/v1/agents/${agentId}`)).status, 200, 'a project-bound key reaches its agent');
  t.equal((await boundApi('GET', `/v1/agents/${otherAgent}`)).status, 403, 'and no other');
  t.same((await boundApi('GET', '/v1/agents')).body.agents.map((a: any) => a.agentId), [agentId]);
  const made = await boundApi('POST', '/v1/agents', { name: 'From a bound key' });
  t.equal(made.status, 403, 'a bound key creates no agent (it could not reach it)');
  t.equal(made.body.message, 'a key bound to one agent cannot create agents');
  t.same((await api('GET', '/v1/agents')).body.agents.filter((a: any) => a.name === 'From a bound key'), []);
});

t.test("another account's agent created with an agentId equal to a slug of ours does not take that slug over", async (t) => {
  const name = `Squat target ${Date.now()}`;
  const ours = await api('POST', '/v1/agents', { name });
  const slug = ours.body.slug;
  t.type(slug, 'string', 'the agent has a slug');
  const squat = await other('POST', '/v1/agents', { name: 'squat', agentId: slug });
  t.equal(squat.status, 201, 'ids are chosen freely; a slug of another account is not an id');
  const bySlug = await api('GET', `/v1/agents/${slug}`);
  t.equal(bySlug.status, 200, 'our slug still names our agent');
  t.equal(bySlug.body.agentId, ours.body.agentId);
  t.equal((await api('PATCH', `/v1/agents/${slug}/branches/main/behavior`, { behavior: 'ours' })).status, 200);
  t.equal((await other('GET', `/v1/agents/${slug}`)).body.agentId, slug, 'and their id still names theirs');
  const key = await admin(p)('POST', '/keys', { account_id: accountId, scope: 'conversations', project_id: slug, permissions: ['conversations_data'] });
  t.equal(key.status, 201, 'the admin API resolves the slug within the account');
  t.equal(key.body.project_id, ours.body.agentId);
  const conversations = await http(p.edge, 'GET', `/v3/${accountId}/${slug}/conversations`, { headers: { 'x-api-key': key.body.key } });
  t.equal(conversations.status, 200, 'so do the path-addressed families');
});

t.test('within an account no name is one agent\'s id and another\'s slug, in either order of creation', async (t) => {
  const first = await api('POST', '/v1/agents', { name: 'Front desk' });
  const slug = first.body.slug;
  const squat = await api('POST', '/v1/agents', { name: 'Collider', agentId: slug });
  t.equal(squat.status, 409, 'a chosen agentId that is our slug');
  t.match(squat.body.errors, [{ field: 'agentId' }]);
  t.equal((await api('GET', `/v1/agents/${slug}`)).body.agentId, first.body.agentId, 'the slug still names the first agent');

  const taken = `desk-${Date.now()}`;
  t.equal((await api('POST', '/v1/agents', { name: 'Chosen', agentId: taken })).status, 201);
  const later = await api('POST', '/v1/agents', { name: taken });
  t.equal(later.status, 201);
  t.not(later.body.slug, taken, 'a derived slug that is another agent\'s id gets a suffix');
  t.equal((await api('GET', `/v1/agents/${later.body.slug}`)).body.agentId, later.body.agentId, 'and reaches the later agent');
  t.equal((await api('GET', `/v1/agents/${taken}`)).body.name, 'Chosen');
});

t.test('at the same moment too: an agent named X and one with agentId X, created together, never both hold X', async (t) => {
  // Each create checks before it stores, so two made together each pass the other's check: the claim on the name
  // decides (a 409 for the chosen id, or a suffixed slug for the derived one).
  for (let i = 0; i < 20; i++) {
    const name = `race${i}-${Date.now()}`;
    const [named, chosen] = await Promise.all([api('POST', '/v1/agents', { name }), api('POST', '/v1/agents', { name: 'Chosen', agentId: name })]);
    t.ok(named.status === 201 || chosen.status === 201, `round ${i}: one of them is made`);
    t.notOk(named.status === 201 && chosen.status === 201 && named.body.slug === name, `round ${i}: not both, with the slug ${name}`);
    const reached = await api('GET', `/v1/agents/${name}`);
    if (chosen.status === 201) t.equal(reached.body.agentId, name, `round ${i}: ${name} reaches the agent with that id`);
    else {
      t.equal(chosen.status, 409);
      t.equal(reached.body.agentId, named.body.agentId, `round ${i}: ${name} reaches the agent with that slug`);
    }
    if (named.status === 201) t.equal((await api('GET', `/v1/agents/${named.body.slug}`)).body.agentId, named.body.agentId, `round ${i}: the named agent by its own slug`);
  }
});

t.test('ids: 422 malformed, 404 unknown', async (t) => {
  const agentId = await newAgent();
  const malformed = await api('GET', `/v1/agents/${encodeURIComponent('bad id!')}`);
  t.equal(malformed.status, 422);
  isFieldError(t, malformed.body);
  t.equal((await api('GET', '/v1/agents/agent-doesnotexist000')).status, 404);
  t.equal((await api('POST', `/v1/agents/${agentId}/branches/${encodeURIComponent('no$such')}/merge`)).status, 422);
  t.equal((await api('POST', `/v1/agents/${agentId}/branches/nosuch/merge`)).status, 404);
  t.equal((await api('POST', `/v1/agents/${agentId}/deployments/dep_nosuch/promote`)).status, 404);
  t.equal((await api('POST', `/v1/agents/${agentId}/deployments/${encodeURIComponent('dep nosuch')}/rollback`)).status, 422);
  const unknownRoute = await api('GET', '/v1/agents/x/nothing-here');
  t.equal(unknownRoute.status, 404);
  isFieldError(t, unknownRoute.body);
});

t.test('ids that name what every object inherits (__proto__, constructor, toString...) are unknown ids: 404, nothing polluted, the process stays up', async (t) => {
  const agentId = await newAgent('Inherited names');
  const base = `/v1/agents/${agentId}/branches/main`;
  t.equal((await api('POST', `${base}/knowledge-base/topics`, { name: 'Hours', content: 'We open at 9.' })).status, 201);
  for (const name of ['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf']) {
    for (const kind of ['knowledge-base/topics', 'attributes', 'variants']) {
      const r = await api('GET', `${base}/${kind}/${name}`);
      t.equal(r.status, 404, `GET ${kind}/${name}`);
      isFieldError(t, r.body);
    }
    // An edit through Object.prototype would set `name` on every object of the process (prom-client then
    // refused every label set, and the edge thread died).
    t.equal((await api('PATCH', `${base}/knowledge-base/topics/${name}`, { name: 'pwned', content: 'x' })).status, 404, `PATCH topics/${name}`);
    t.equal((await api('DELETE', `${base}/knowledge-base/topics/${name}`)).status, 404, `DELETE topics/${name}`);
  }
  const inherited = await api('POST', `${base}/variants`, { name: 'Inherited', attributeValues: { values: { constructor: 'x', toString: 'y' } } });
  t.equal(inherited.status, 400, 'attribute values naming inherited keys are unknown attributes');
  t.match(inherited.body.errors, [{ field: 'attributeValues' }]);
  t.equal((await http(p.edge, 'GET', '/metrics')).status, 200, 'metrics still render');
  t.equal((await api('GET', `${base}/knowledge-base/topics`)).body.topics.length, 1, 'the real topic is untouched');
  t.equal((await api('POST', '/v1/agents', { name: 'After' })).status, 201, 'and the edge serves on');
});

t.test('merge: items named as what every object inherits merge as any other (one side deleted a function named constructor)', async (t) => {
  const agentId = await newAgent('Inherited merge');
  const base = `/v1/agents/${agentId}/branches`;
  for (const name of ['constructor', 'toString']) t.equal((await api('PUT', `${base}/main/functions/${name}`, { code: 'function f(conv) { return 1; }' })).status, 200, name);
  t.equal((await api('POST', base, { name: 'trim' })).status, 201);
  t.equal((await api('DELETE', `${base}/trim/functions/constructor`)).status, 204, 'the branch deletes constructor');
  t.equal((await api('DELETE', `${base}/main/functions/toString`)).status, 204, 'main deletes toString');
  t.equal((await api('PATCH', `${base}/trim/behavior`, { behavior: 'Trimmed.' })).status, 200);
  const merged = await api('POST', `${base}/trim/merge`);
  t.equal(merged.status, 200, merged.text);
  t.same((await api('GET', `${base}/main/functions`)).body.functions, [], 'both deletions stand on main');
});

t.test('branches: behavior and topics on main and on a branch; merge combines', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}`;
  t.same((await api('PATCH', `${base}/branches/main/behavior`, { behavior: 'Be kind.' })).body, { behavior: 'Be kind.' });
  const hours = await api('POST', `${base}/branches/main/knowledge-base/topics`, { name: 'Opening hours', content: '9 to 5' });
  t.equal(hours.status, 201);
  t.match(hours.body, { name: 'Opening hours', content: '9 to 5' });
  const dup = await api('POST', `${base}/branches/main/knowledge-base/topics`, { name: 'Opening hours', content: 'again' });
  t.equal(dup.status, 409, 'topic names are unique per branch');

  const branch = await api('POST', `${base}/branches`, { name: 'summer' });
  t.equal(branch.status, 201);
  t.match(branch.body, { name: 'summer', status: 'open', baseBranch: 'main', agentId });
  t.equal((await api('POST', `${base}/branches`, { name: 'summer' })).status, 409, 'branch names are unique');
  // Any name the contract's string allows: its id addresses it where the name cannot be a path segment.
  const free = await api('POST', `${base}/branches`, { name: 'summer menu/v2 ✓' });
  t.equal(free.status, 201, free.text);
  t.equal((await api('PATCH', `${base}/branches/${free.body.branchId}/behavior`, { behavior: 'Summer.' })).status, 200, 'reached by its id');
  for (const bad of ['', '   ', 'tab\there', 'x'.repeat(101)]) t.equal((await api('POST', `${base}/branches`, { name: bad })).status, 400, JSON.stringify(bad));
  const branchId = branch.body.branchId;

  // the branch edits the topic and adds one; main changes behavior meanwhile: different things combine
  t.equal((await api('PATCH', `${base}/branches/${branchId}/knowledge-base/topics/${hours.body.id}`, { content: '8 to 8' })).status, 200);
  t.equal((await api('POST', `${base}/branches/summer/knowledge-base/topics`, { name: 'Parking', content: 'free' })).status, 201);
  t.equal((await api('PATCH', `${base}/branches/main/behavior`, { behavior: 'Be brief.' })).status, 200);
  t.same((await api('GET', `${base}/branches/main/behavior`)).body, { behavior: 'Be brief.' });

  const merged = await api('POST', `${base}/branches/${branchId}/merge`);
  t.equal(merged.status, 200, merged.text);
  t.equal(merged.body.branch.status, 'merged');
  const main = await api('GET', `${base}/branches/main`);
  t.equal(main.body.behavior, 'Be brief.', "main's own change stays");
  t.same(main.body.topics.map((x: any) => [x.name, x.content]), [['Opening hours', '8 to 8'], ['Parking', 'free']]);
  const after = await api('GET', `${base}/branches/summer`);
  t.equal(after.status, 200, 'a merged branch stays readable');
  t.equal(after.body.status, 'merged');
  t.equal((await api('POST', `${base}/branches/summer/merge`)).status, 409, 'merging twice is a conflict');
  t.equal((await api('PATCH', `${base}/branches/summer/behavior`, { behavior: 'x' })).status, 409, 'a merged branch is read-only');
  t.equal((await api('POST', `${base}/branches/main/merge`)).status, 400, 'main does not merge into itself');
});

t.test('branches by name: a name with spaces, slashes or other characters works in every {branch} path once percent-encoded', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}/branches`;
  for (const name of ['winter sale', 'a/b c', 'Été 2027 ✓', 'price?x=1#top']) {
    const created = await api('POST', base, { name });
    t.equal(created.status, 201, `created ${name}`);
    const ref = encodeURIComponent(name);
    const read = await api('GET', `${base}/${ref}`);
    t.equal(read.status, 200, `read by name: ${name}`);
    t.equal(read.body.branchId, created.body.branchId);
    t.same((await api('PATCH', `${base}/${ref}/behavior`, { behavior: `for ${name}` })).body, { behavior: `for ${name}` }, 'its behavior by name');
    t.equal((await api('POST', `${base}/${ref}/knowledge-base/topics`, { name: 'Hours', content: '9 to 5' })).status, 201, 'a topic by name');
    t.equal((await api('PUT', `${base}/${ref}/voice`, { voice: 'en-gb', rate: 170 })).status, 200, 'its voice by name');
    t.same((await api('GET', `${base}/${ref}/voice`)).body, { voice: 'en-gb', rate: 170 }, 'read back by name');
    t.equal((await api('PUT', `${base}/${ref}/functions/greet`, { code: 'function f(conv) { return 1; }' })).status, 200, 'a function by name');
    t.equal((await api('POST', `${base}/${ref}/variants`, { name: 'Paris' })).status, 201, 'a variant by name');
    t.equal((await api('GET', `${base}/${encodeURIComponent(created.body.branchId)}`)).body.name, name, 'and still by id');
  }
  t.equal((await api('GET', `${base}/${encodeURIComponent('no such branch')}`)).status, 404, 'an unknown name is not found');
  t.equal((await api('GET', `${base}/${encodeURIComponent('tab\there')}`)).status, 422, 'control characters are malformed');
  t.equal((await api('GET', `${base}/${encodeURIComponent('   ')}`)).status, 422, 'a blank name is malformed');
});

t.test('merge: concurrent merges of one branch: one merges it, the others get 409', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}`;
  const branch = (await api('POST', `${base}/branches`, { name: 'race' })).body.branchId;
  t.equal((await api('POST', `${base}/branches/race/knowledge-base/topics`, { name: 'Only once', content: 'x' })).status, 201);
  const merges = await Promise.all(Array.from({ length: 6 }, () => api('POST', `${base}/branches/${branch}/merge`)));
  t.same(merges.map((m) => m.status).sort(), [200, 409, 409, 409, 409, 409], merges.map((m) => m.status).join(' '));
  t.same((await api('GET', `${base}/branches/main`)).body.topics.map((x: any) => x.name), ['Only once'], 'its changes are in main once');
});

t.test('merge: edits to the branch while it merges: a 200 holds every edit acknowledged before it, each later one is refused', async (t) => {
  // Rounds of 20 topic creates on a branch with its merge sent among them: a create the merge did not take in is
  // a 409 (the branch being merged, or merged), never a 201 missing from main; the merge itself is not refused for
  // the edits around it.
  for (let round = 0; round < 5; round++) {
    const agentId = await newAgent();
    const base = `/v1/agents/${agentId}`;
    t.equal((await api('POST', `${base}/branches`, { name: 'feat' })).status, 201);
    const names = Array.from({ length: 20 }, (_, i) => `f${i}`);
    const creates = names.map((name) => api('POST', `${base}/branches/feat/knowledge-base/topics`, { name, content: 'x' }));
    await new Promise((r) => setTimeout(r, 5 + round * 5));
    const merge = await api('POST', `${base}/branches/feat/merge`);
    const statuses = await Promise.all(creates);
    t.equal(merge.status, 200, `round ${round}: merged (${merge.text})`);
    const inMain = new Set((await api('GET', `${base}/branches/main/knowledge-base/topics`)).body.topics.map((x: any) => x.name));
    const acknowledged = names.filter((_, i) => statuses[i]!.status === 201);
    t.same(names.filter((n) => inMain.has(n)), acknowledged, `round ${round}: main holds exactly the ${acknowledged.length} creates answered 201`);
    t.ok(statuses.every((r) => r.status === 201 || r.status === 409), `round ${round}: the others refused as read-only`);
  }
});

t.test('merge: a thing changed on both sides is a 409 naming the fields, and nothing changes', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}`;
  await api('PATCH', `${base}/branches/main/behavior`, { behavior: 'v1' });
  const topic = await api('POST', `${base}/branches/main/knowledge-base/topics`, { name: 'Menu', content: 'soup' });
  const b = (await api('POST', `${base}/branches`, { name: 'feature' })).body.branchId;
  await api('PATCH', `${base}/branches/${b}/behavior`, { behavior: 'branch' });
  await api('PATCH', `${base}/branches/main/behavior`, { behavior: 'main' });
  await api('PATCH', `${base}/branches/${b}/knowledge-base/topics/${topic.body.id}`, { content: 'salad' });
  await api('PATCH', `${base}/branches/main/knowledge-base/topics/${topic.body.id}`, { content: 'stew' });
  const r = await api('POST', `${base}/branches/${b}/merge`);
  t.equal(r.status, 409);
  isFieldError(t, r.body);
  t.same(r.body.errors.map((e: any) => e.field).sort(), ['behavior', `topics.${topic.body.id}`]);
  const main = await api('GET', `${base}/branches/main`);
  t.equal(main.body.behavior, 'main');
  t.equal(main.body.topics[0].content, 'stew');
  t.equal((await api('GET', `${base}/branches/${b}`)).body.status, 'open');
});

t.test('merge: the same name added on both sides conflicts; identical changes do not', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}`;
  const b = (await api('POST', `${base}/branches`, { name: 'x' })).body.branchId;
  await api('PATCH', `${base}/branches/${b}/behavior`, { behavior: 'same' });
  await api('PATCH', `${base}/branches/main/behavior`, { behavior: 'same' });
  await api('POST', `${base}/branches/${b}/knowledge-base/topics`, { name: 'FAQ', content: 'a' });
  await api('POST', `${base}/branches/main/knowledge-base/topics`, { name: 'FAQ', content: 'b' });
  const r = await api('POST', `${base}/branches/${b}/merge`);
  t.equal(r.status, 409);
  t.equal(r.body.errors.length, 1);
  t.match(r.body.errors[0].field, /^topics\./);
});

t.test('promotes of one deployment at the same moment: what promoting it that many times in a row gives', async (t) => {
  const agentId = await newAgent('Promoted together');
  const base = `/v1/agents/${agentId}`;
  for (let round = 0; round < 5; round++) {
    await api('PATCH', `${base}/branches/main/behavior`, { behavior: `round ${round}` });
    const source = (await api('POST', `${base}/deployments/publish`, { environment: 'sandbox' })).body.deployment;
    const answers = await Promise.all(Array.from({ length: 12 }, () => api('POST', `${base}/deployments/${source.id}/promote`)));
    const to = (environment: string) => answers.filter((r) => r.status === 200 && r.body.deployment.environment === environment);
    t.equal(to('pre-release').length, 1, `round ${round}: one pre-release`);
    t.equal(to('live').length, 1, `round ${round}: one live, from it`);
    t.equal(to('live')[0]?.body.deployment.metadata.sourceDeploymentId, to('pre-release')[0]?.body.deployment.id);
    t.equal(answers.filter((r) => r.status === 409 && r.body.errors?.[0]?.code === undefined).length + to('pre-release').length + to('live').length, 12, `round ${round}: the others 409`);
    const made = (await api('GET', `${base}/deployments`)).body.deployments.filter((d: any) => d.artifactVersion === source.artifactVersion && d.metadata.action === 'promote');
    t.equal(made.length, 2, `round ${round}: two deployments made by promoting it`);
  }
});

t.test('deployments: publish to sandbox, promote to pre-release and live, rollback', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}`;
  await api('PATCH', `${base}/branches/main/behavior`, { behavior: 'v1' });
  const first = await api('POST', `${base}/deployments/publish`, { environment: 'sandbox' });
  t.equal(first.status, 200, first.text);
  const d1 = first.body.deployment;
  t.match(first.body, { testRunIds: [] });
  t.match(d1, { accountId, agentId, environment: 'sandbox', version: '1', createdBy: String, createdAt: String, metadata: Object });
  for (const f of ['id', 'accountId', 'agentId', 'environment', 'artifactVersion', 'version', 'createdBy', 'createdAt', 'metadata']) t.ok(f in d1, `deployment has ${f}`);
  const again = await api('POST', `${base}/deployments/publish`, {});
  t.equal(again.body.deployment.artifactVersion, d1.artifactVersion, 'same content, same artifact version');
  t.equal(again.body.deployment.version, '2', 'version increases per agent');
  t.equal((await api('POST', `${base}/deployments/publish`, { environment: 'live' })).status, 400, 'publish only targets sandbox');
  t.equal((await api('POST', `${base}/deployments/publish`, { environment: 'prod' })).status, 400);

  const pre = await api('POST', `${base}/deployments/${d1.id}/promote`);
  t.equal(pre.status, 200);
  t.match(pre.body.deployment, { environment: 'pre-release', artifactVersion: d1.artifactVersion });
  // The deployment moves on (contract 3.2): promoting the same one again takes it from where it has got to.
  const live = await api('POST', `${base}/deployments/${d1.id}/promote`, {});
  t.match(live.body.deployment, { environment: 'live', artifactVersion: d1.artifactVersion, metadata: { sourceDeploymentId: pre.body.deployment.id } });
  t.equal((await api('POST', `${base}/deployments/${live.body.deployment.id}/promote`)).status, 409, 'nothing after live');
  t.equal((await api('POST', `${base}/deployments/${d1.id}/promote`)).status, 409, 'nor for the deployment that got there');
  t.equal((await api('POST', `${base}/deployments/${pre.body.deployment.id}/promote`)).status, 409, 'nor for any step of its way');

  await api('PATCH', `${base}/branches/main/behavior`, { behavior: 'v2' });
  const v2 = (await api('POST', `${base}/deployments/publish`, { environment: 'sandbox' })).body.deployment;
  t.not(v2.artifactVersion, d1.artifactVersion, 'new content, new artifact');
  const v2live = (await api('POST', `${base}/deployments/${v2.id}/promote`, { targetEnvironment: 'live' })).body.deployment;
  t.equal(v2live.environment, 'live');
  const active = await api('GET', `${base}/deployments/active`);
  t.equal(active.body.activeDeployments.live.artifactVersion, v2.artifactVersion);

  // Rollback reverts the environment to the given deployment: that one is active again, as it was.
  const rb = await api('POST', `${base}/deployments/${live.body.deployment.id}/rollback`, { deploymentMessage: 'v2 broke greetings' });
  t.equal(rb.status, 200);
  t.match(rb.body.deployment, {
    id: live.body.deployment.id,
    version: live.body.deployment.version,
    environment: 'live',
    artifactVersion: d1.artifactVersion,
    metadata: { action: 'promote', rollback: { deploymentMessage: 'v2 broke greetings', rolledBackFrom: v2live.id, rolledBackAt: String, rolledBackBy: String } },
  });
  t.equal((await api('GET', `${base}/deployments/active`)).body.activeDeployments.live.id, live.body.deployment.id, 'the active live deployment');
  const rbDefault = await api('POST', `${base}/deployments/${v2live.id}/rollback`);
  t.equal(rbDefault.body.deployment.id, v2live.id);
  t.equal(rbDefault.body.deployment.metadata.rollback.deploymentMessage, '', 'deploymentMessage defaults to empty');
  const lives = await api('GET', `${base}/deployments?environment=live`);
  t.same(lives.body.deployments.map((d: any) => d.id), [v2live.id, live.body.deployment.id], 'the one activated last first');
  t.equal((await api('GET', `${base}/deployments?environment=nowhere`)).status, 400);
  t.equal((await api('GET', `${base}/deployments/${d1.id}`)).body.id, d1.id);
  t.equal((await api('POST', `${base}/deployments/${d1.id}/rollback`, { deploymentMessage: 5 })).status, 400);
});

t.test('real-time configs: merge variables at once, null removes, per page', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}/real-time-configs`;
  const r1 = await api('PATCH', `${base}/live/variables`, { variables: { open_hour: 9, close_hour: 17, greeting: { en: 'Hi' } } });
  t.equal(r1.status, 200);
  t.same(r1.body.variables, { open_hour: 9, close_hour: 17, greeting: { en: 'Hi' } });
  const r2 = await api('PATCH', `${base}/live/variables`, { variables: { close_hour: 20, open_hour: null, greeting: { fr: 'Salut' } } });
  t.same(r2.body.variables, { close_hour: 20, greeting: { en: 'Hi', fr: 'Salut' } });
  t.same((await api('GET', `${base}/live`)).body.variables, r2.body.variables);
  t.equal((await api('GET', `${base}/sandbox`)).status, 404);
  t.equal((await api('PATCH', `${base}/live/variables`, { variables: [1, 2] })).status, 400);
  t.equal((await api('PATCH', `${base}/live/variables`, {})).status, 400);
  t.equal((await api('GET', base)).body.configPages.length, 1);
});

t.test('real-time configs: variables named constructor and toString, at the top and nested, are data like any other', async (t) => {
  const agentId = await newAgent();
  const page = `/v1/agents/${agentId}/real-time-configs/live/variables`;
  t.equal((await api('PATCH', page, { variables: { constructor: 'a', toString: 'b', nested: { constructor: 'c', toString: 'd' } } })).status, 200);
  // Each later change compares the stored value with the new one: the comparison took such an object for a class instance.
  const r = await api('PATCH', page, { variables: { greeting: 'hi', nested: { constructor: 'e' } } });
  t.equal(r.status, 200, r.text);
  t.same(r.body.variables, { constructor: 'a', toString: 'b', nested: { constructor: 'e', toString: 'd' }, greeting: 'hi' });
  const removed = await api('PATCH', page, { variables: { toString: null } });
  t.equal(removed.status, 200, removed.text);
  t.same(removed.body.variables, { constructor: 'a', nested: { constructor: 'e', toString: 'd' }, greeting: 'hi' });
});

t.test('attributes and variants on a branch, deployed with the artifact', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}/branches/main`;
  const site = await api('POST', `${base}/attributes`, { name: 'site' });
  t.equal(site.status, 201);
  t.equal((await api('POST', `${base}/attributes`, { name: 'site' })).status, 409);
  const london = await api('POST', `${base}/variants`, { name: 'London', attributeValues: { values: { site: 'LDN' } } });
  t.equal(london.status, 201);
  t.same(london.body.attributeValues, { values: { [site.body.id]: 'LDN' } }, 'attribute values are stored by attribute id');
  t.equal(london.body.isDefault, true, 'the first variant is the default');
  const paris = await api('POST', `${base}/variants`, { name: 'Paris', isDefault: true, attributeValues: { values: { [site.body.id]: 'PAR' } } });
  t.equal((await api('GET', `${base}/variants/${london.body.id}`)).body.isDefault, false, 'one default at a time');
  t.equal((await api('POST', `${base}/variants`, { name: 'Rome', attributeValues: { values: { nope: 'x' } } })).status, 400);
  t.same((await api('GET', `${base}/variants`)).body.variants.map((v: any) => v.name), ['London', 'Paris']);
  t.same((await api('GET', `${base}/attributes`)).body.attributes.map((a: any) => a.name), ['site']);
  t.equal((await api('GET', `${base}/attributes/${site.body.id}`)).status, 200);
  t.equal((await api('GET', `${base}/variants/var_nosuch`)).status, 404);
  const before = await api('POST', `/v1/agents/${agentId}/deployments/publish`, {});
  t.equal(before.status, 200);
  t.ok(paris.body.id);
});

t.test('merge: a default variant added on each side leaves main with one default, main\'s', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}/branches`;
  t.equal((await api('POST', base, { name: 'b1' })).status, 201);
  const paris = await api('POST', `${base}/b1/variants`, { name: 'Paris' });
  t.equal(paris.body.isDefault, true, 'the first on the branch is its default');
  const berlin = await api('POST', `${base}/main/variants`, { name: 'Berlin' });
  t.equal(berlin.body.isDefault, true, 'the first on main is its default');
  const merged = await api('POST', `${base}/b1/merge`);
  t.equal(merged.status, 200, merged.text);
  const variants = (await api('GET', `${base}/main/variants`)).body.variants;
  t.same(variants.map((v: any) => [v.name, v.isDefault]), [['Berlin', true], ['Paris', false]], 'main\'s default stays the one');
  // A default the branch chose over main's own (main's unchanged since the cut) is the branch's change: it stays.
  t.equal((await api('POST', base, { name: 'b2' })).status, 201);
  t.equal((await api('POST', `${base}/b2/variants`, { name: 'Rome', isDefault: true })).status, 201);
  t.equal((await api('POST', `${base}/b2/merge`)).status, 200);
  const after = (await api('GET', `${base}/main/variants`)).body.variants;
  t.same(after.filter((v: any) => v.isDefault).map((v: any) => v.name), ['Rome'], 'one default, the one the branch made so');
});

t.test('concurrent edits on one branch are all kept', async (t) => {
  const agentId = await newAgent();
  const names = Array.from({ length: 20 }, (_, i) => `topic ${i}`);
  const results = await Promise.all(names.map((name) => api('POST', `/v1/agents/${agentId}/branches/main/knowledge-base/topics`, { name, content: name })));
  t.ok(results.every((r) => r.status === 201));
  const topics = await api('GET', `/v1/agents/${agentId}/branches/main/knowledge-base/topics`);
  t.equal(topics.body.topics.length, 20);
});

t.test('project functions: put, read, list, delete, parse check, merged with the branch', async (t) => {
  const agentId = await newAgent();
  const base = `/v1/agents/${agentId}/branches`;
  const put = await api('PUT', `${base}/main/functions/start`, { code: 'function start(conv) { conv.say("hi"); }' });
  t.equal(put.status, 200);
  t.same(put.body, { name: 'start', code: 'function start(conv) { conv.say("hi"); }' });
  t.equal((await api('PUT', `${base}/main/functions/broken`, { code: 'function (' })).status, 400, 'a syntax error is refused at save time');
  t.equal((await api('PUT', `${base}/main/functions/${encodeURIComponent('bad-name')}`, { code: 'x => x' })).status, 422);
  t.equal((await api('PUT', `${base}/main/functions/empty`, { code: '' })).status, 400);
  const branch = (await api('POST', `/v1/agents/${agentId}/branches`, { name: 'tools' })).body.branchId;
  t.equal((await api('PUT', `${base}/${branch}/functions/lookup`, { code: 'async (conv, args) => "found " + args.id' })).status, 200);
  t.equal((await api('DELETE', `${base}/${branch}/functions/start`)).status, 204);
  t.equal((await api('DELETE', `${base}/${branch}/functions/start`)).status, 404);
  t.same((await api('GET', `${base}/${branch}/functions`)).body.functions.map((f: any) => f.name), ['lookup']);
  t.equal((await api('POST', `${base}/${branch}/merge`)).status, 200);
  t.same((await api('GET', `${base}/main/functions`)).body.functions.map((f: any) => f.name), ['lookup'], 'the merge added one and removed the other');
  t.equal((await api('GET', `${base}/main/functions/lookup`)).body.code, 'async (conv, args) => "found " + args.id');
  t.equal((await api('GET', `${base}/main/functions/start`)).status, 404);
  // Names of Object.prototype's members are names like any other: absent, they are 404, not what the prototype lends.
  for (const name of ['valueOf', 'toString', 'constructor', 'hasOwnProperty', '__defineGetter__']) {
    t.equal((await api('GET', `${base}/main/functions/${name}`)).status, 404, `GET ${name}`);
    t.equal((await api('DELETE', `${base}/main/functions/${name}`)).status, 404, `DELETE ${name}`);
  }
  t.equal((await api('PUT', `${base}/main/functions/toString`, { code: 'function toString(conv) { return "mine"; }' })).status, 200, 'a function named toString');
  t.equal((await api('GET', `${base}/main/functions/toString`)).body.code, 'function toString(conv) { return "mine"; }');
  t.ok((await api('GET', `${base}/main/functions`)).body.functions.some((f: any) => f.name === 'toString'), 'listed');
  t.equal((await api('PUT', `${base}/main/functions/__proto__`, { code: 'x => x' })).status, 422, '__proto__ is no name a map of functions can hold');
});
