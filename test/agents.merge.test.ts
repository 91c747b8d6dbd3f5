import t from 'tap';
import type { Store } from '../store/mod.js';
import { MERGE_LOCK_STALE_MS } from '../builder/branches.js';
import { builderRecords, type BuilderRecords } from '../builder/records.js';
import { client } from './helpers/http.js';
import { removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';
import { tenant } from './helpers/tenants.js';

// A merge is all-or-nothing as the client sees it: main holds the whole branch (200) or none of it (409), whatever
// is edited around it, and a merge a crash interrupted is settled by the next merge or edit of its branch.

let p: Platform;
let store: Store;
let records: BuilderRecords;
let api: ReturnType<typeof client>;

t.before(async () => {
  ({ p, store } = await startPlatformWithStore());
  records = builderRecords(store);
  api = client(p.edge, { 'x-api-key': (await tenant(p, 'Acme')).key });
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

/** An agent whose main has behavior `base` and a topic `Menu` (`soup`), with a branch `feat` cut from it. */
async function agentWithBranch(): Promise<{ base: string; topicId: string; branchId: string }> {
  const agent = await api('POST', '/v1/agents', { name: 'Merged' });
  if (agent.status !== 201) throw new Error(agent.text);
  const base = `/v1/agents/${agent.body.agentId}/branches`;
  await api('PATCH', `${base}/main/behavior`, { behavior: 'base' });
  const topic = await api('POST', `${base}/main/knowledge-base/topics`, { name: 'Menu', content: 'soup' });
  const branch = await api('POST', base, { name: 'feat' });
  if (branch.status !== 201) throw new Error(branch.text);
  return { base, topicId: topic.body.id, branchId: branch.body.branchId };
}

/** What main holds of the branch's own changes (behavior `from branch`, a topic `Added`): all, none, or some. */
async function mainHolds(base: string): Promise<'all' | 'none' | 'some'> {
  const main = (await api('GET', `${base}/main`)).body;
  const behavior = main.behavior === 'from branch';
  const added = main.topics.some((x: any) => x.name === 'Added');
  return behavior && added ? 'all' : !behavior && !added ? 'none' : 'some';
}

t.test('merge: with the branch and main edited on the same item while it runs, main holds all of it (200) or none (409)', async (t) => {
  // Main changes a topic as the merge starts and the branch changes the same topic around it: a branch edit that
  // lands before the merge takes the branch meets main's as a conflict (409), one after is refused. Main never keeps
  // part of a merge that answered 409 (it did when the merge went in rounds, each taking in the edits of the last).
  const seen: Record<number, number> = {};
  for (let round = 0; round < 48; round++) {
    const { base, topicId, branchId } = await agentWithBranch();
    t.equal((await api('PATCH', `${base}/feat/behavior`, { behavior: 'from branch' })).status, 200);
    t.equal((await api('POST', `${base}/feat/knowledge-base/topics`, { name: 'Added', content: 'x' })).status, 201);
    const onMain = api('PATCH', `${base}/main/knowledge-base/topics/${topicId}`, { content: `stew ${round}` });
    // The branch's edit sent before the merge or after it, a few turns of the event loop apart (more as the rounds
    // go): it lands before the merge, while it runs or after it.
    const editBranch = () => api('PATCH', `${base}/feat/knowledge-base/topics/${topicId}`, { content: `salad ${round}` });
    const mergeIt = () => api('POST', `${base}/${branchId}/merge`);
    const editFirst = round % 2 === 0;
    const first = editFirst ? editBranch() : mergeIt();
    for (let i = 0; i < (round >> 1) % 8; i++) await new Promise((r) => setImmediate(r));
    const second = editFirst ? mergeIt() : editBranch();
    const [merge, onBranch] = editFirst ? [second, first] : [first, second];
    const [m, mainEdit, branchEdit] = await Promise.all([merge, onMain, onBranch]);
    seen[m.status] = (seen[m.status] ?? 0) + 1;
    t.equal(mainEdit.status, 200, `round ${round}: main's edit is taken`);
    t.ok(branchEdit.status === 200 || branchEdit.status === 409, `round ${round}: the branch's edit is taken or refused (${branchEdit.text})`);
    const holds = await mainHolds(base);
    if (m.status === 200) {
      t.equal(holds, 'all', `round ${round}: merged, main holds the whole branch`);
      t.equal((await api('GET', `${base}/feat`)).body.status, 'merged');
    } else {
      t.equal(m.status, 409, `round ${round}: ${m.text}`);
      t.equal(holds, 'none', `round ${round}: refused (${m.body.message}), main holds none of the branch`);
      t.equal((await api('GET', `${base}/feat`)).body.status, 'open', `round ${round}: the branch is open again`);
      t.equal((await api('PATCH', `${base}/feat/behavior`, { behavior: 'again' })).status, 200, `round ${round}: and takes edits`);
    }
  }
  t.pass(`outcomes: ${JSON.stringify(seen)}`);
});

t.test('merge: the others meet a merge under way with 409; the branch reads as open until it lands', async (t) => {
  const { base, branchId } = await agentWithBranch();
  // A merge holding the branch, as the store has it between the merge taking the branch and marking it merged.
  await records.branches.update({ id: branchId }, { $set: { status: 'merging', merge_lock: { token: 'merge_running', at: Date.now() } } });
  const read = await api('GET', `${base}/feat`);
  t.equal(read.body.status, 'open', 'the hold is not shown');
  const edit = await api('PATCH', `${base}/feat/behavior`, { behavior: 'late' });
  t.equal(edit.status, 409);
  t.match(edit.body, { message: 'the branch is being merged; try again', errors: [{ field: 'branch', message: 'a merge of this branch is under way' }] });
  const merge = await api('POST', `${base}/${branchId}/merge`);
  t.equal(merge.status, 409);
  t.match(merge.body, { message: 'the branch is being merged; try again', errors: [{ field: 'branchId', message: 'a merge of this branch is under way' }] });
  t.equal((await api('GET', `${base}/feat`)).body.behavior, 'base', 'the refused edit is not there');
});

t.test('merge: a merge a crash interrupted is settled by the next edit or merge once its hold is stale', async (t) => {
  const stale = { token: 'merge_crashed', at: Date.now() - MERGE_LOCK_STALE_MS - 1000 };

  // Interrupted before it wrote main: the branch is open again, and the edit goes in.
  const before = await agentWithBranch();
  t.equal((await api('PATCH', `${before.base}/feat/behavior`, { behavior: 'from branch' })).status, 200);
  await records.branches.update({ id: before.branchId }, { $set: { status: 'merging', merge_lock: stale } });
  t.equal((await api('POST', `${before.base}/feat/knowledge-base/topics`, { name: 'Added', content: 'x' })).status, 201, 'an edit settles it open');
  t.equal((await api('GET', `${before.base}/feat`)).body.status, 'open');
  t.equal(await mainHolds(before.base), 'none');
  const merged = await api('POST', `${before.base}/${before.branchId}/merge`);
  t.equal(merged.status, 200, merged.text);
  t.equal(await mainHolds(before.base), 'all', 'and it merges whole');

  // Interrupted after it wrote main (main holds every change of the branch): the branch is marked merged.
  const after = await agentWithBranch();
  t.equal((await api('PATCH', `${after.base}/feat/behavior`, { behavior: 'from branch' })).status, 200);
  t.equal((await api('PATCH', `${after.base}/main/behavior`, { behavior: 'from branch' })).status, 200, 'what the interrupted merge wrote');
  await records.branches.update({ id: after.branchId }, { $set: { status: 'merging', merge_lock: stale } });
  const edit = await api('PATCH', `${after.base}/feat/behavior`, { behavior: 'later' });
  t.equal(edit.status, 409, 'an edit settles it merged, and is refused as on any merged branch');
  t.match(edit.body, { message: 'the branch is merged and read-only' });
  const read = await api('GET', `${after.base}/feat`);
  t.equal(read.body.status, 'merged');
  t.type(read.body.mergedAt, 'string');

  // Interrupted, settled by a merge: it settles the branch, then merges it as any.
  const again = await agentWithBranch();
  t.equal((await api('PATCH', `${again.base}/feat/behavior`, { behavior: 'from branch' })).status, 200);
  t.equal((await api('POST', `${again.base}/feat/knowledge-base/topics`, { name: 'Added', content: 'x' })).status, 201);
  await records.branches.update({ id: again.branchId }, { $set: { status: 'merging', merge_lock: stale } });
  const retried = await api('POST', `${again.base}/${again.branchId}/merge`);
  t.equal(retried.status, 200, retried.text);
  t.equal(retried.body.branch.status, 'merged');
  t.equal(await mainHolds(again.base), 'all');
});
