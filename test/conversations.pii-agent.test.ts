/**
 * Personal data as a key without `pii` reads it, on both sides of a chat conversation (docs/recordings.md,
 * Transcripts): a number typed with punctuation around it ("07700900123.", "(020) 7946 0958") is a number, and an
 * agent that reads back a card number or confirms a phone number says personal data too, so its answer is masked
 * by the same rules as the caller's words and not found by them. Through the real platform as a client: real chat
 * turns, the Conversations API over HTTP, a key with `pii` and one without. A function that keeps what the
 * caller said in the conversation's variables keeps personal data too: the row's `state` is masked by the same rules.
 */
import t, { type Test } from 'tap';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { chatConversation, idsFound, maskingReaders, type ConversationsReader } from './helpers/conversations.js';
import { platformFor, type Platform } from './helpers/platform.js';

/** An agent that answers some questions with personal data of its own saying. */
const READING_BACK = {
  turn: `function turn(conv, message) {
    if (/remember/.test(message)) {
      conv.state.saved = { note: message, tags: ['kept', message], n: 7700900555 };
      return 'noted with thanks';
    }
    if (/hand me over/.test(message)) {
      conv.state.callers = { regular: true };
      conv.state.callers[message] = 'asked';
      conv.state.callers[message + ' again'] = 'twice';
      conv.handoff('callback ' + message, 'caller asked: ' + message);
      return 'transferring you now';
    }
    if (/callback/.test(message)) return 'We will ring you back on 07700900321.';
    if (/card on file/.test(message)) return 'The card on file is 4111 1111 1111 1111, thank you.';
    return 'noted with thanks';
  }`,
};

let p: Platform;
let c: ChatProject;
const conversation = (messages: string[]) => chatConversation(c, messages);
const ids: Record<string, string> = {};
/** The readers with and without `pii`, and the range they read. */
let masked: ConversationsReader;
let full: ConversationsReader;
let range: Record<string, string>;
const found = (t: Test, get: ConversationsReader, query: Record<string, string>) => idsFound(t, get, range, query);

t.before(async () => {
  p = await platformFor(t);
  c = await chatProject(p, { name: 'Reading Back Co', functions: READING_BACK });
  ({ masked, full, range } = await maskingReaders(p, c));
  ids.typed = await conversation(['My number is 07700900123.', 'Or try (020) 7946 0958!', 'the kumquat order please']);
  ids.callback = await conversation(['can I get a callback please', 'the kumquat order please']);
  ids.card = await conversation(['which card on file do you have', 'the kumquat order please']);
  ids.saved = await conversation(['please remember 07700900555 for me', 'the kumquat order please']);
  ids.handoff = await conversation(['the kumquat order please', 'hand me over, I am zed@example.org']);
});

/** The turns of one conversation as a key reads them (v3). */
async function turnsOf(t: Test, get: ConversationsReader, id: string, version = 'v3'): Promise<any[]> {
  const r = await get({ ...range, limit: '100' }, { version });
  t.equal(r.status, 200, r.status === 200 ? 'answered' : r.text);
  return r.body.conversations.find((x: any) => x.id === id).turns;
}

t.test('a number typed with punctuation around it is masked for a key without pii', async (t) => {
  for (const version of ['v1', 'v2', 'v3']) {
    const turns = await turnsOf(t, masked, ids.typed, version);
    t.equal(turns[1].user_input, '[redacted]', `${version}: "07700900123." is masked`);
    t.equal(turns[2].user_input, '[redacted]', `${version}: "(020) 7946 0958!" is masked`);
    t.equal(turns[3].user_input, 'the kumquat order please', `${version}: a turn without personal data is not`);
  }
  const raw = await turnsOf(t, full, ids.typed);
  t.equal(raw[1].user_input, 'My number is 07700900123.', 'a key with pii reads it');
  t.same(await found(t, masked, { query_type: 'transcript', query: '07700900123' }), [], 'masked: the number finds nothing');
  t.same(await found(t, masked, { query_type: 'transcript', query: '7946' }), [], 'masked: nor a part of the other');
  t.same(await found(t, full, { query_type: 'transcript', query: '07700900123' }), [ids.typed], 'pii: it finds its conversation');
});

t.test('an agent answer that holds personal data is masked whole, and not found by it, for a key without pii', async (t) => {
  for (const version of ['v1', 'v2', 'v3']) {
    const listed = await masked({ ...range, limit: '100' }, { version });
    t.equal(listed.status, 200);
    t.notMatch(listed.text, /07700900321|4111 1111/, `${version}: no row shows what the agent read back`);
  }
  for (const id of [ids.callback, ids.card]) {
    const turns = await turnsOf(t, masked, id);
    t.equal(turns[1].agent_response, '[redacted]', 'the answer holding personal data is masked');
    t.equal(turns[2].agent_response, 'noted with thanks', 'other answers are not');
    t.not(turns[1].user_input, '[redacted]', 'the question itself held none');
  }
  t.equal((await turnsOf(t, full, ids.card))[1].agent_response, 'The card on file is 4111 1111 1111 1111, thank you.', 'a key with pii reads the answer');
  for (const [query, id] of [['07700900321', ids.callback], ['4111', ids.card], ['ring', ids.callback]] as const) {
    for (const turn_type of [undefined, 'agent']) {
      const q: Record<string, string> = turn_type ? { query_type: 'transcript', query, turn_type } : { query_type: 'transcript', query };
      t.same(await found(t, masked, q), [], `masked: "${query}" (${turn_type ?? 'both sides'}) finds nothing`);
      t.same(await found(t, full, q), [id], `pii: "${query}" (${turn_type ?? 'both sides'}) finds its conversation`);
    }
  }
  // Words of answers read unmasked are found as before.
  t.same(await found(t, masked, { query_type: 'transcript', query: 'thanks', turn_type: 'agent' }), [ids.typed, ids.callback, ids.card, ids.saved, ids.handoff], 'masked: unmasked answers are searched');
  // Semantic search leaves out a conversation with a masked answer, as one with a masked question.
  const ranked = await found(t, masked, { query_type: 'semantic', query: 'kumquat order ring back card on file' });
  t.notOk(ranked.includes(ids.callback) || ranked.includes(ids.card) || ranked.includes(ids.typed), 'masked: semantic search ranks none of them');
  t.ok((await found(t, full, { query_type: 'semantic', query: 'kumquat order ring back card on file' })).includes(ids.card), 'pii: it ranks them');
});

t.test('the conversation variables a function kept are masked by the same rules, in every version and in search results', async (t) => {
  const wanted = { note: '[redacted]', tags: ['kept', '[redacted]'], n: 7700900555 };
  for (const version of ['v1', 'v2', 'v3']) {
    const r = await masked({ ...range, limit: '100' }, { version });
    t.equal(r.status, 200);
    t.notMatch(r.text, /07700900555/, `${version}: the kept number is in no row`);
    t.same(r.body.conversations.find((x: any) => x.id === ids.saved).state.saved, wanted, `${version}: strings masked, the number read as it is`);
  }
  // A row found by transcript search (a stored document rendered from the turns the search parsed).
  const found = await masked({ ...range, query_type: 'transcript', query: 'kumquat' });
  t.equal(found.status, 200);
  t.same(found.body.conversations.find((x: any) => x.id === ids.saved).state.saved, wanted, 'a search result: masked too');
  t.notMatch(found.text, /07700900555/);
  const raw = await full({ ...range, limit: '100' });
  t.equal(raw.body.conversations.find((x: any) => x.id === ids.saved).state.saved.note, 'please remember 07700900555 for me', 'a key with pii reads it');
  t.ok(raw.body.conversations.every((x: any) => typeof x.state.from_ === 'string'), 'built-in variables are there, read as stored');
});

t.test("the handoff's reason and destination, and variable names that hold personal data, are masked too", async (t) => {
  const reads = async (get: ConversationsReader, query: Record<string, string>, version = 'v3') => {
    const r = await get({ ...range, ...query }, { version });
    t.equal(r.status, 200, r.status === 200 ? 'answered' : r.text);
    return { text: r.text, row: r.body.conversations.find((x: any) => x.id === ids.handoff) };
  };
  for (const [what, query, version] of [['v1', { limit: '100' }, 'v1'], ['v2', { limit: '100' }, 'v2'], ['v3', { limit: '100' }, 'v3'], ['a search result', { query_type: 'transcript', query: 'kumquat' }, 'v3']] as const) {
    const { text, row } = await reads(masked, query, version);
    t.notMatch(text, /zed@example\.org/, `${what}: the address is in no row`);
    t.equal(row.handoff_reason, '[redacted]', `${what}: the reason`);
    t.equal(row.handoff_destination, '[redacted]', `${what}: the destination`);
    t.same(Object.keys(row.state.callers), ['regular', '[redacted]', '[redacted] 2'], `${what}: names that hold it renamed in place, without colliding`);
    t.same(Object.values(row.state.callers), [true, 'asked', 'twice'], `${what}: their values kept`);
  }
  const { row } = await reads(full, { limit: '100' });
  t.equal(row.handoff_reason, 'caller asked: hand me over, I am zed@example.org', 'a key with pii reads the reason');
  t.equal(row.handoff_destination, 'callback hand me over, I am zed@example.org');
  t.ok(Object.hasOwn(row.state.callers, 'hand me over, I am zed@example.org'), 'and the name');
});
