/**
 * Search must not tell a key without `pii` what its masked transcripts hide (docs/recordings.md, Transcripts;
 * docs/conversations.md). With the project's `pii_redaction` on (the default), such a key reads a turn that
 * holds personal data as `[redacted]`; were its searches matched on the raw turns, searching for a phone
 * number or an e-mail address would say which conversations hold it. Through the real platform as a client:
 * real chat turns, the Conversations API over HTTP, a key with `pii` and one without.
 */
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { chatConversation, idsFound, maskingReaders, MARKING_FUNCTIONS, type ConversationsReader } from './helpers/conversations.js';
import { platformFor, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';


let p: Platform;
let c: ChatProject;
let masked: ConversationsReader;
let full: ConversationsReader;
/** The range of every search (fixed, since a cursor is valid only for the filters it was issued with). */
let range: Record<string, string>;
const ids: Record<string, string> = {};

const conversation = (messages: string[], open = false) => chatConversation(c, messages, open);
const found = (t: Test, get: ConversationsReader, query: Record<string, string>) => idsFound(t, get, range, query);

t.before(async () => {
  p = await platformFor(t);
  c = await chatProject(p, { name: 'Search Co', functions: MARKING_FUNCTIONS });
  ({ masked, full, range } = await maskingReaders(p, c));
  ids.phone = await conversation(['call me back on 07700900123 about my parking fine', 'the zebracrossing near the clinic']);
  ids.email = await conversation(['my address is jane.doe@example.com for the invoice refund', 'zebracrossing again']);
  ids.marked = await conversation(['my member code Qx81Zk is on the card', 'zebracrossing too']);
  // In progress: its row is the record, not a stored document.
  ids.live = await conversation(['text me at 07700900456 about the parking fine'], true);
  ids.plain = await conversation(['a question about my parking fine and the invoice refund']);
  ids.word = await conversation(['keep it redacted but my number is 07700900789']);
});

/** The ids of a v3 search walked by cursor, one row a page (ten pages at most), asserting each page answered 200. */
async function walked(t: Test, get: ConversationsReader, query: Record<string, string>): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 10; pages++) {
    const r = await get({ ...range, ...query, limit: '1', ...(cursor ? { cursor } : {}) });
    t.equal(r.status, 200, r.status === 200 ? 'answered' : r.text);
    seen.push(...r.body.conversations.map((x: any) => x.id));
    cursor = r.body.cursor;
    if (!cursor) break;
  }
  return seen;
}

t.test('every version: a key without pii never finds a conversation by a value it reads as [redacted]', async (t) => {
  // v1 and v2 have no search filters (contract 4.3: v3 only): refused for every key, so nothing to learn there.
  for (const version of ['v1', 'v2']) {
    for (const get of [masked, full]) {
      for (const query_type of ['transcript', 'semantic']) {
        const r = await get({ ...range, query_type, query: '07700900123' }, { version });
        t.equal(r.status, 400, `${version} ${query_type} refused`);
      }
    }
    const listed = await masked({ start_time: range.start_time, limit: '100' }, { version });
    t.equal(listed.status, 200, listed.status === 200 ? 'answered' : listed.text);
    t.notMatch(listed.text, /07700900123|jane\.doe|Qx81Zk/, `${version}: rows never show the hidden values`);
  }
  for (const [value, id] of [['07700900123', ids.phone], ['jane.doe@example.com', ids.email], ['Qx81Zk', ids.marked], ['07700900456', ids.live]]) {
    t.same(await found(t, masked, { query_type: 'transcript', query: value }), [], `masked: ${value} finds nothing`);
    t.same(await found(t, masked, { query_type: 'transcript', query: value, turn_type: 'user' }), [], `masked, user turns: ${value} finds nothing`);
    t.same(await found(t, masked, { query_type: 'transcript', query: value, include_latency: 'true' }), [], `masked, rows from records: ${value} finds nothing`);
    t.same(await found(t, full, { query_type: 'transcript', query: value }), [id], `pii: ${value} finds its conversation`);
  }
  // Nor by the mask's own word: that would tell whether a hidden utterance said it.
  t.same(await found(t, masked, { query_type: 'transcript', query: 'redacted' }), [], 'masked: "redacted" finds no hidden utterance that said it');
  t.same(await found(t, full, { query_type: 'transcript', query: 'redacted' }), [ids.word], 'pii: it finds the one that did');
  // A word said in the same turn as the hidden value is hidden with it (the whole utterance is masked).
  t.same(await found(t, masked, { query_type: 'transcript', query: 'parking fine' }), [ids.plain], 'masked: words of a masked turn are not found');
  t.same(await found(t, full, { query_type: 'transcript', query: 'parking fine' }), [ids.phone, ids.live, ids.plain], 'pii: they are');
  // With the project's pii_redaction off the same key reads the raw text, and searches it.
  await admin(p)('PATCH', `/projects/${c.agentId}/settings`, { pii_redaction: false });
  t.teardown(() => admin(p)('PATCH', `/projects/${c.agentId}/settings`, { pii_redaction: true }));
  t.same(await found(t, masked, { query_type: 'transcript', query: '07700900123' }), [ids.phone], 'pii_redaction off: the raw value finds its conversation');
  t.ok((await found(t, masked, { query_type: 'semantic', query: 'jane.doe@example.com invoice refund' })).includes(ids.email), 'pii_redaction off: semantic search ranks it');
});

t.test('v3 transcript search: words the key reads still find their conversations, and pages count only those', async (t) => {
  const all = [ids.phone, ids.email, ids.marked];
  t.same(await found(t, masked, { query_type: 'transcript', query: 'zebracrossing' }), all, 'a turn without personal data is searched as usual');
  t.same(await found(t, masked, { query_type: 'transcript', query: 'zebracrossing', turn_type: 'user', include_latency: 'true' }), all, 'from records too');
  t.same(await found(t, full, { query_type: 'transcript', query: 'zebracrossing' }), all);
  // Terms found in different turns: one masked for the key, one not.
  t.same(await found(t, masked, { query_type: 'transcript', query: 'invoice zebracrossing' }), [], 'masked: every term must be in what the key reads');
  t.same(await found(t, full, { query_type: 'transcript', query: 'invoice zebracrossing' }), [ids.email]);
  // A cursor walk of one row a page: no empty page, no row the key may not find, an end where its rows end.
  const parking = { query_type: 'transcript', query: 'parking' };
  t.same(await walked(t, masked, parking), [ids.plain], 'masked: the walk finds one conversation, on one page');
  t.same(await walked(t, full, parking), [ids.phone, ids.live, ids.plain], 'pii: three');
  const first = await masked({ ...range, query_type: 'transcript', query: 'parking', limit: '1' });
  t.notOk('next_offset' in first.body, 'masked: no next page after the only row it may find');
});

t.test('v3 semantic search leaves out, for a key without pii, the conversations that have a masked turn', async (t) => {
  for (const query of ['invoice refund', 'jane.doe@example.com invoice refund', 'parking fine 07700900123']) {
    const mine = await found(t, masked, { query_type: 'semantic', query });
    t.notOk(mine.includes(ids.email) || mine.includes(ids.phone) || mine.includes(ids.marked) || mine.includes(ids.live), `masked: "${query}" ranks no conversation with a masked turn`);
    t.ok(mine.includes(ids.plain), `masked: "${query}" finds the conversation without personal data`);
  }
  t.ok((await found(t, full, { query_type: 'semantic', query: 'jane.doe@example.com invoice refund' })).includes(ids.email), 'pii: ranked on the whole transcript');
  t.ok((await found(t, full, { query_type: 'semantic', query: 'parking fine' })).includes(ids.live), 'pii: in progress too');
  // Paged by rank: the pages hold what the key may find, and the walk ends with them.
  const seen = await walked(t, masked, { query_type: 'semantic', query: 'parking fine invoice refund zebracrossing' });
  t.same(seen, [ids.plain], 'masked: one page, one conversation, then the end');
});

t.test('any phone number said beside a visible word: the word finds the conversation, the number never does', async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.stringMatching(/^[1-9][0-9]{6,14}$/),
      fc.stringMatching(/^[a-z]{4,9}$/),
      async (digits, word) => {
        // `zq`: no stop word, no spoken digit ("oh", "one") and no word of the other conversations.
        const visible = `zq${word}`;
        const id = await conversation([`reach me at ${digits} please`, `${visible} is what I wanted`]);
        const hidden = await found(t, masked, { query_type: 'transcript', query: digits });
        const shown = await found(t, masked, { query_type: 'transcript', query: visible });
        const raw = await found(t, full, { query_type: 'transcript', query: digits });
        return !hidden.includes(id) && shown.includes(id) && raw.includes(id);
      },
    ),
    { numRuns: 8 },
  );
});
