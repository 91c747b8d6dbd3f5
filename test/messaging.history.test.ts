import fc from 'fast-check';
import t from 'tap';
import { sessionHistory, sessionKey } from '../actors/session/history.js';
import { renderStep } from '../actors/session/wire.js';
import type { JournalEntry, Store } from '../store/mod.js';
import { countedStore } from './helpers/counted-store.js';

// A session's history, read by a reconnection, a catch-up or a duplicate's echo, against the embedded store: the
// same frames as a read of the session's whole journal, for any cursor; and a cursor near the head reads the
// session's newest steps, not its whole journal (the store's reads are counted as they pass).

const SESSION = 'ses_history';

/**
 * Commits a session's steps as the host does (snapshot and journal entry in one write): a start, then `steps`
 * steps each with 0 to 2 user messages and sometimes a streamed reply (several sequences in one event).
 */
async function commitSession(store: Store, steps: Array<{ messages: number; streamed: boolean }>): Promise<number> {
  let seq = 0;
  let version = 0;
  const put = async (events: JournalEntry['events']) => {
    const [r] = await store.snapshots.putMany([{ key: sessionKey(SESSION), data: { v: version }, expectedVersion: version, fence: 1, shard: 0, deadline: null, step: { value: 'active', events } }]);
    if (!r?.ok) throw new Error('put refused');
    version = r.version;
  };
  await put([{ type: 'session.started', data: { seq: ++seq, streaming: true, account_id: 'a', project_id: 'p', connector_id: 'c' } }]);
  for (const step of steps) {
    const events: JournalEntry['events'] = [{ type: 'session.typing', data: {} }];
    for (let i = 0; i < step.messages; i++) events.push({ type: 'session.user_message', data: { seq: ++seq, text: `message ${seq}` } });
    if (step.streamed) {
      const text = 'one two three four five six seven eight nine ten eleven twelve';
      events.push({ type: 'session.agent_message', data: { seq: seq + 1, text, streamed: true, suggestions: [] } });
      seq += renderStep(SESSION, { at: 0, version: 0, events: [events.at(-1)!] }, true).length;
    }
    await put(events);
  }
  return seq;
}

const whole = async (store: Store) =>
  (await store.journal.ofActor(sessionKey(SESSION))).flatMap((e) => renderStep(SESSION, e, true)).filter((f) => f.s !== null);

t.test('for any cursor: the frames after it, the head, and the frame at a sequence, as the whole journal has them', async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.record({ messages: fc.integer({ min: 0, max: 2 }), streamed: fc.boolean() }), { maxLength: 120, size: 'max' }),
      fc.integer({ min: -2, max: 400 }),
      async (steps, cursor) => {
        const { store, close } = await countedStore('sb-history-');
        try {
        const head = await commitSession(store, steps);
        const all = await whole(store);
        const history = sessionHistory(store);
        const after = await history.after(SESSION, cursor);
        const resumed = await history.resume(SESSION, cursor);
        const at = await history.at(SESSION, cursor);
        const expected = all.filter((f) => f.s! > cursor);
        return (
          JSON.stringify(after) === JSON.stringify(expected) &&
          resumed.head === head &&
          resumed.past === cursor > head &&
          JSON.stringify(resumed.frames) === JSON.stringify(cursor > head ? all : expected) &&
          at === (all.find((f) => f.s === cursor)?.j ?? null)
        );
        } finally {
          await close();
        }
      },
    ),
    { numRuns: 40 },
  );
});

t.test("a cursor near the head reads the session's newest steps, not its whole journal", async (t) => {
  const { store, read, close } = await countedStore('sb-history-');
  t.teardown(close);
  const steps = Array.from({ length: 2000 }, (_, i) => ({ messages: 1, streamed: i % 10 === 0 }));
  const head = await commitSession(store, steps);
  const history = sessionHistory(store);
  const before = read();
  const frames = await history.after(SESSION, head - 3);
  t.equal(frames.length, 3);
  t.ok(read() - before <= 16, `a catch-up of the last 3 frames read ${read() - before} of 2001 entries`);
  const mark = read();
  const resumed = await history.resume(SESSION, head - 40);
  t.equal(resumed.frames.length, 40);
  t.ok(read() - mark <= 16 + 64, `a resume 40 frames back read ${read() - mark} entries`);
  const echo = read();
  t.ok(await history.at(SESSION, head - 1), "a recent duplicate's echo");
  t.ok(read() - echo <= 16, `its read: ${read() - echo} entries`);
});
