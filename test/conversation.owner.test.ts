/**
 * A conversation's owner, as the Chat API reads it on every turn: from the conversation's journal, its first
 * entry alone when that started it, whatever the length of the conversation.
 */
import t from 'tap';
import { conversationOwner } from '../actors/conversation/mod.js';
import { storeFor } from './helpers/store.js';

const store = await storeFor(t, 'sb-owner-');

const started = { type: 'conversation.started', data: { account_id: 'acc_1', project_id: 'prj_1', environment: 'live', channel: 'CHAT' } };
const turn = { type: 'conversation.turn', data: {} };

/** Commits `events` as the next step of `conversation/<id>`. */
async function step(id: string, version: number, events: Array<{ type: string; data: Record<string, unknown> }>): Promise<void> {
  const [r] = await store.snapshots.putMany([{ key: `conversation/${id}`, data: { v: version }, expectedVersion: version - 1, fence: 1, shard: 0, deadline: null, step: { value: 'active', events } }]);
  t.ok(r.ok);
}

/** Records the options of every `ofActor` call and the entries each returned. */
function watchReads(): Array<{ opts: unknown; returned: number }> {
  const calls: Array<{ opts: unknown; returned: number }> = [];
  const ofActor = store.journal.ofActor.bind(store.journal);
  store.journal.ofActor = async (key, opts) => {
    const entries = await ofActor(key, opts);
    calls.push({ opts, returned: entries.length });
    return entries;
  };
  t.teardown(() => {
    store.journal.ofActor = ofActor;
  });
  return calls;
}

t.test('the first entry alone, however long the conversation', async (t) => {
  await step('long', 1, [started]);
  for (let v = 2; v <= 60; v++) await step('long', v, [turn]);
  const calls = watchReads();
  t.same(await conversationOwner(store, 'long'), { accountId: 'acc_1', projectId: 'prj_1', environment: 'live', channel: 'CHAT' });
  // The first entry alone is named by the journal's ends; reading two from the start walks all 60.
  t.same(calls, [{ opts: { limit: 1 }, returned: 1 }], 'one read, of the first entry');
});

t.test('the entry after the first when the first did not start it; null when none did or none exists', async (t) => {
  await step('late', 1, [{ type: 'conversation.noted', data: {} }]);
  await step('late', 2, [started]);
  await step('late', 3, [turn]);
  t.same(await conversationOwner(store, 'late'), { accountId: 'acc_1', projectId: 'prj_1', environment: 'live', channel: 'CHAT' });
  await step('never', 1, [turn]);
  await step('never', 2, [turn]);
  t.equal(await conversationOwner(store, 'never'), null);
  t.equal(await conversationOwner(store, 'missing'), null);
});
