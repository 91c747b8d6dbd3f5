/**
 * A conversation's transcript is bounded (`CONVERSATION_MAX_TRANSCRIPT_BYTES`, docs/sandbox.md §5), through the Chat
 * API: each call of a function is within its output limit (256 KiB), but nothing bounded what a conversation
 * gathered over its turns, so a hundred turns of 256 KiB made a 26 MB record that every read serialized. With a
 * small limit (1 MiB) set for the test, a `turn` function says 250 KiB a turn until its words no longer fit: that
 * call is a function error (counted in `function_errors`, its state change discarded) and the responder answers;
 * the conversation goes on. The user's messages are kept until the turn that fills the transcript, which is
 * answered and ends the conversation (`end_conversation`, end reason `full`); later messages are refused as to any
 * ended conversation. The record never holds more than the limit and that one last turn. What an `external_event`
 * function says is held to the same limit.
 */
import t from 'tap';
import { recordsPlatform } from './helpers/records.js';
import { chatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { waitForProjections } from './helpers/projections.js';
import { externalKey, webhook } from './helpers/external-events.js';

const LIMIT = 1024 * 1024;
const SAID = 250 * 1024;
const TURN = String.raw`function turn(conv, message) {
  if (message === 'big') {
    conv.state.calls = (conv.state.calls ?? 0) + 1;
    conv.say('x'.repeat(${SAID}));
    return;
  }
  if (message === 'calls') return 'calls ' + (conv.state.calls ?? 0);
}`;

/** What the transcript holds of a turn: its texts in bytes of UTF-8 (the Chat API turns here send no metadata; an event's turn has a few bytes of it, left out). */
const bytesOf = (turn: { user_input: string; agent_response: string }) => Buffer.byteLength(turn.user_input) + Buffer.byteLength(turn.agent_response);

/** `wait:<id>` waits for an external event; the event's function says 250 KiB and counts its calls. */
const EVENTS = {
  turn: String.raw`function turn(conv, message) {
    if (message.startsWith('wait:')) { conv.await_external_event(message.slice(5)); return 'Waiting'; }
    if (message === 'calls') return 'calls ' + (conv.state.calls ?? 0);
  }`,
  external_event: String.raw`function external_event(conv, event) {
    conv.state.calls = (conv.state.calls ?? 0) + 1;
    conv.say('z'.repeat(${SAID}));
  }`,
};

let p: Awaited<ReturnType<typeof recordsPlatform>>['p'];
let records: Awaited<ReturnType<typeof recordsPlatform>>['records'];
t.before(async () => {
  ({ p, records } = await recordsPlatform(t, { CONVERSATION_MAX_TRANSCRIPT_BYTES: String(LIMIT) }));
});

t.test('a conversation past its transcript limit: function errors, then the turn that fills it ends it', async (t) => {
  const c = await chatProject(p, { functions: { turn: TURN } });
  const read = conversationsClient(p, c, await conversationsKey(p, c));
  const created = await c.chat('create', {});
  t.equal(created.status, 200);
  const id = created.body.conversation_id as string;
  const respond = (message: string) => c.chat('respond', { conversation_id: id, message });
  const transcript = async () => {
    const r = await read({ start_time: new Date(Date.now() - 3_600_000).toISOString() });
    return (r.body.conversations as any[]).find((x) => x.id === id);
  };

  // Four turns of 250 KiB fit in 1 MiB with the greeting.
  for (let n = 1; n <= 4; n++) {
    const r = await respond('big');
    t.equal(r.status, 200, `turn ${n} answered`);
    t.equal(r.body.response, 'x'.repeat(SAID), `turn ${n}: the function's words are the answer`);
    t.equal(r.body.end_conversation, false);
  }
  t.equal((await respond('calls')).body.response, 'calls 4', 'four calls applied');

  // The fifth would take the transcript past the limit: a function error; the responder answers instead.
  const refused = await respond('big');
  t.equal(refused.status, 200, 'the turn is answered');
  t.not(refused.body.response, 'x'.repeat(SAID), 'not with the words that did not fit');
  t.ok(Buffer.byteLength(refused.body.response) < 1024, 'but by the responder');
  t.equal(refused.body.end_conversation, false, 'and the conversation goes on');
  t.equal((await respond('calls')).body.response, 'calls 4', 'nothing the refused call did is applied');
  t.equal((await respond('big')).body.end_conversation, false, 'a call that does not fit is refused every time');
  await waitForProjections(p);
  t.equal((await records.get(id))!.function_errors, 2, 'each refused call is counted in function_errors');
  let record = await transcript();
  const held = record.turns.reduce((n: number, turn: any) => n + bytesOf(turn), 0);
  t.ok(held <= LIMIT, `the transcript holds ${held} bytes, within the limit`);
  t.equal(record.in_progress, true);

  // The user's messages are kept until one fills the transcript: that turn is answered and ends the conversation.
  const message = 'y'.repeat(32_768);
  let last: any;
  for (let n = 0; n < Math.ceil(LIMIT / message.length) + 1; n++) {
    last = await respond(message);
    t.equal(last.status, 200, 'a message to a conversation with room left is answered');
    if (last.body.end_conversation) break;
  }
  t.equal(last.body.end_conversation, true, 'the turn that filled the transcript ends the conversation');
  t.ok(last.body.response.length > 0, 'and is answered');
  const after = await respond('hello?');
  t.equal(after.status, 409, 'a later message is refused as to any ended conversation');
  t.match(after.body, { error_message: String });

  record = await transcript();
  t.equal(record.in_progress, false, 'the conversation has ended');
  const turns = record.turns as any[];
  t.equal(turns.at(-1).user_input, message, "the last turn is the user's message that filled it");
  const before = turns.slice(0, -1).reduce((n: number, turn: any) => n + bytesOf(turn), 0);
  const total = before + bytesOf(turns.at(-1));
  t.ok(before < LIMIT, `before the last turn the transcript was under the limit (${before} bytes)`);
  t.ok(total >= LIMIT, `the last turn filled it (${total} bytes)`);
  t.ok(total <= LIMIT + bytesOf(turns.at(-1)), 'the record holds at most the limit and that one turn');
  await waitForProjections(p);
  t.equal((await records.get(id))!.end_reason, 'full', 'the record says why it ended');
});

t.test("an external_event function's words are held to the same limit", async (t) => {
  const c = await chatProject(p, { name: 'Events Co', functions: EVENTS });
  const key = await externalKey(p, c);
  const id = (await c.chat('create', {})).body.conversation_id as string;
  /** The record once `until` holds of it (the event's function runs after the webhook has answered). */
  const record = async (until: (r: any) => boolean) => {
    for (let tries = 0; ; tries++) {
      await waitForProjections(p);
      const r = await records.get(id);
      if (r && until(r)) return r;
      if (tries === 200) throw new Error(`the record did not come: ${JSON.stringify({ state: r?.state && { calls: r.state.calls, awaiting: r.state.awaiting_external_event }, function_errors: r?.function_errors })}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  // Four events' words fit in 1 MiB; the fifth's do not: a function error, its state change discarded.
  for (let n = 1; n <= 5; n++) {
    // The answer starts with what the last event's function said (unread until now), cut to its bound.
    const waits = await c.chat('respond', { conversation_id: id, message: `wait:e${n}` });
    t.ok(waits.status === 200 && waits.body.response.endsWith('Waiting'), `waits for e${n}`);
    t.equal((await webhook(p.edge, c, key, { raw: JSON.stringify({ id: `e${n}` }) })).status, 201, `e${n} delivered`);
    await record((r) => r.state.calls === Math.min(n, 4) && r.function_errors === (n === 5 ? 1 : 0) && !r.state.awaiting_external_event);
  }
  const r = await c.chat('respond', { conversation_id: id, message: 'calls' });
  t.equal(r.status, 200, 'the conversation still answers');
  t.ok(r.body.response.endsWith('calls 4') && !r.body.response.includes('z'), 'four calls applied, the refused one not: nothing of it said');
  t.equal(r.body.end_conversation, false);
  const held = await record(() => true);
  t.equal(held.function_errors, 1, 'the refused call is counted in function_errors');
  t.equal(held.turns.filter((turn: any) => turn.agent_response === 'z'.repeat(SAID)).length, 4, "four events' words are in the transcript");
  const bytes = held.turns.reduce((n: number, turn: any) => n + bytesOf(turn), 0);
  t.ok(bytes <= LIMIT, `the transcript holds ${bytes} bytes, within the limit`);
});
