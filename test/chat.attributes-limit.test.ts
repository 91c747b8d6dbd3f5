/**
 * A conversation's integration attributes are bounded (`CONVERSATION_MAX_ATTRIBUTES_BYTES`, docs/chat.md), through the
 * Chat API: every respond merged a request's `integration_attributes` into the conversation's and the record, with no
 * bound, so a client grew one conversation's snapshot (rewritten at every step) and record by a request body a turn.
 * With a bound of 4 KiB set for the test: a create whose attributes are past it is a 400 and starts nothing; a
 * respond whose attributes, merged into the conversation's, would be past it is a 400 (refused by the conversation,
 * which alone holds the earlier ones) and changes nothing: no turn, the same attributes, the next respond answered.
 */
import t from 'tap';
import type { Platform } from './helpers/platform.js';
import { recordsPlatform } from './helpers/records.js';
import { chatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { waitForProjections } from './helpers/projections.js';

const LIMIT = 4096;
/** The attributes' keys and sizes as the functions see them, and the turns taken (each `turn` counts one). */
const TURN = String.raw`function turn(conv, message) {
  conv.state.turns = (conv.state.turns ?? 0) + 1;
  if (message === 'attributes') {
    const a = conv.integration_attributes;
    return Object.keys(a).sort().map((k) => k + '=' + String(a[k]).length).join(' ') + ' turns=' + conv.state.turns;
  }
  return 'ok';
}`;
const REFUSED = `integration_attributes would take the conversation's past ${LIMIT} bytes of JSON`;

let p: Platform;
let records: Awaited<ReturnType<typeof recordsPlatform>>['records'];
t.before(async () => {
  ({ p, records } = await recordsPlatform(t, { CONVERSATION_MAX_ATTRIBUTES_BYTES: String(LIMIT) }));
});

t.test('a create whose integration attributes are past the bound is a 400 and starts nothing', async (t) => {
  const c = await chatProject(p, { name: 'Attrs Create', functions: { turn: TURN } });
  const read = conversationsClient(p, c, await conversationsKey(p, c));
  const over = await c.chat('create', { integration_attributes: { a: 'x'.repeat(LIMIT) } });
  t.equal(over.status, 400);
  t.same(over.body, { error_message: REFUSED }, "in the Chat API's error shape");
  // Multibyte text counts in bytes of UTF-8: 1400 characters of three bytes are past 4096.
  const wide = await c.chat('create', { integration_attributes: { a: '中'.repeat(1400) } });
  t.equal(wide.status, 400, 'the bound counts bytes of UTF-8, not characters');
  const list = await read({ start_time: new Date(Date.now() - 3_600_000).toISOString() });
  t.equal(list.status, 200);
  t.same(list.body.conversations, [], 'no conversation was started');

  const within = await c.chat('create', { integration_attributes: { a: 'x'.repeat(LIMIT - 100) } });
  t.equal(within.status, 200, 'attributes within the bound start a conversation');
  const id = within.body.conversation_id as string;
  t.equal((await c.chat('respond', { conversation_id: id, message: 'attributes' })).body.response, `a=${LIMIT - 100} turns=1`);
});

t.test('a respond whose attributes, merged, would be past the bound is a 400 and changes nothing', async (t) => {
  const c = await chatProject(p, { name: 'Attrs Respond', functions: { turn: TURN } });
  const created = await c.chat('create', { integration_attributes: { a: 'x'.repeat(2500) } });
  t.equal(created.status, 200);
  const id = created.body.conversation_id as string;
  const respond = (message: string, integration_attributes?: Record<string, unknown>) =>
    c.chat('respond', { conversation_id: id, message, ...(integration_attributes ? { integration_attributes } : {}) });
  const record = async () => {
    await waitForProjections(p);
    return (await records.get(id))!;
  };
  t.equal((await respond('hello', { b: 'y'.repeat(1000) })).status, 200, 'attributes that fit once merged are taken');
  const before = await record();
  t.same(Object.keys(before.integration_attributes).sort(), ['a', 'b']);

  // 1000 bytes more each time: alone far within the bound, merged past it (2500 + 1000 + 1000 and the JSON around).
  for (const n of [1, 2]) {
    const refused = await respond('attributes', { c: 'z'.repeat(1000) });
    t.equal(refused.status, 400, `a respond past the bound is refused (${n})`);
    t.same(refused.body, { error_message: REFUSED }, "in the Chat API's error shape");
  }
  // The request's own attributes past the bound: refused by the edge, before the conversation is asked.
  const alone = await respond('attributes', { d: 'w'.repeat(LIMIT) });
  t.equal(alone.status, 400);
  t.same(alone.body, { error_message: REFUSED });

  // Nothing of the refused requests was applied: no turn was taken, the attributes are as they were.
  t.equal((await respond('attributes')).body.response, 'a=2500 b=1000 turns=2', 'the next respond is answered, as if none had come');
  const after = await record();
  t.same(after.integration_attributes, before.integration_attributes, "the record's integration_attributes are unchanged");
  t.equal(after.turns.length, before.turns.length + 1, 'the refused requests left no turn');

  // Replacing a key counts once: merged within the bound, taken.
  const replaced = await respond('attributes', { b: 'v'.repeat(1400) });
  t.equal(replaced.status, 200);
  t.equal(replaced.body.response, 'a=2500 b=1400 turns=3', 'a key replaced within the bound is taken');
  t.equal((await record()).integration_attributes.b, 'v'.repeat(1400));
});
