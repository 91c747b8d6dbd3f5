/**
 * A function's output limits (docs/sandbox.md §5) are bytes of UTF-8, through the Chat API: the conversation
 * output (state, what was said, handoff, as JSON) at most 256 KiB and the return value at most 64 KiB. They were
 * counted in UTF-16 code units, so a state of 255,000 CJK characters (765 KB stored) passed. Just over either limit
 * in non-ASCII text is a function error (counted in `function_errors`, the state unchanged, the responder answers);
 * just under is accepted.
 */
import t from 'tap';
import { conversationRecords } from '../actors/conversation/record.js';
import { removeDir, startPlatformWithStore } from './helpers/platform.js';
import { chatProject } from './helpers/chat.js';
import { waitForProjections } from './helpers/projections.js';

// '中' is one UTF-16 code unit and three bytes of UTF-8.
const TURN = String.raw`function turn(conv, message) {
  const [what, n] = message.split(' ');
  if (what === 'state') { conv.state.s = '\u4e2d'.repeat(Number(n)); return 'stored ' + n; }
  if (what === 'value') return '\u4e2d'.repeat(Number(n));
  if (what === 'size') return 'size ' + (conv.state.s === undefined ? 0 : conv.state.s.length);
}`;

const OUTPUT_BYTES = 256 * 1024;
const VALUE_BYTES = 64 * 1024;

t.test('non-ASCII output is measured in UTF-8 bytes', async (t) => {
  const { p, store } = await startPlatformWithStore();
  t.teardown(async () => {
    await store.close();
    await p.stop();
    removeDir(p.dataDir);
  });
  const c = await chatProject(p, { functions: { turn: TURN } });
  // The record the conversation actor wrote, read from the same data dir (LMDB is multi-process).
  const records = conversationRecords(store);
  const id = (await c.chat('create', {})).body.conversation_id;
  const say = async (message: string) => {
    const r = await c.chat('respond', { conversation_id: id, message });
    t.equal(r.status, 200, `${message}: answered`);
    return r.body.response as string;
  };
  const functionErrors = async () => {
    await waitForProjections(p);
    return (await records.get(id))!.function_errors;
  };

  // Just under: 87,000 characters are 261,000 bytes, with the rest of the output (the built-in state keys,
  // an empty list of what was said) still under 262,144.
  const under = Math.floor((OUTPUT_BYTES - 1000) / 3);
  t.equal(await say(`state ${under}`), `stored ${under}`, 'a state just under 256 KiB of UTF-8 is accepted');
  t.equal(await say('size'), `size ${under}`, 'and kept');
  t.equal(await functionErrors(), 0, 'no function error');

  // Just over: fewer code units than 256 Ki, more bytes.
  const over = Math.ceil(OUTPUT_BYTES / 3) + 10;
  t.ok(over < OUTPUT_BYTES, 'the state is under the limit in code units');
  t.not(await say(`state ${over}`), `stored ${over}`, 'a state just over 256 KiB of UTF-8 is a function error: the responder answers');
  t.equal(await say('size'), `size ${under}`, 'the state is the one before the refused call');
  t.equal(await functionErrors(), 1, 'counted in function_errors');

  // The return value: JSON text, so two quotes around the characters.
  const valueUnder = Math.floor((VALUE_BYTES - 2) / 3);
  t.equal(await say(`value ${valueUnder}`), '中'.repeat(valueUnder), 'a return value just under 64 KiB of UTF-8 is the answer');
  const valueOver = Math.ceil(VALUE_BYTES / 3) + 10;
  const refused = await say(`value ${valueOver}`);
  t.ok(Buffer.byteLength(refused) < VALUE_BYTES && !refused.includes('中'), 'a return value just over 64 KiB of UTF-8 is a function error: the responder answers');
  t.equal(await functionErrors(), 2, 'counted in function_errors');
});
