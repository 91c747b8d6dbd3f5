/**
 * A semantic search walked by cursor while conversations are written (docs/conversations.md, contract 4.3 rule 3):
 * its pages are of one ranking, the conversations as they were when the first page was read, so a walk
 * returns each of those once, in that order, whatever is written meanwhile. Both readers are walked: a key
 * with `pii` (plain ranking) and one without (masked ranking: `unmaskedPage`).
 */
import t, { type Test } from 'tap';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { chatConversation, maskingReaders, type ConversationsReader } from './helpers/conversations.js';
import { platformFor, type Platform } from './helpers/platform.js';

let p: Platform;

const QUERY = 'zebra giraffe safari booking';

t.before(async () => {
  p = await platformFor(t);
});

interface Fixture {
  c: ChatProject;
  readers: Array<[string, ConversationsReader]>;
  range: Record<string, string>;
  /** Conversations that match the query a little (two shared words): closed ones (slot vectors) and open ones. */
  all: string[];
  open: string[];
}

/** A project of its own per case (the rankings of the cases do not mix). */
async function fixture(name: string): Promise<Fixture> {
  const c = await chatProject(p, { name });
  const { masked, full, range } = await maskingReaders(p, c);
  const all: string[] = [];
  const open: string[] = [];
  for (let i = 0; i < 9; i++) {
    all.push(await chatConversation(c, [`safari booking ${i}`], i % 2 === 0));
    if (i % 2 === 0) open.push(all[i]);
  }
  return { c, readers: [['pii', full], ['masked', masked]], range, all, open };
}

/** The ids of one page of the search (`cursor` null: the first), and the next cursor. */
async function page(t: Test, get: ConversationsReader, range: Record<string, string>, limit: string, cursor: string | null): Promise<{ ids: string[]; cursor: string | null }> {
  const r = await get({ ...range, query_type: 'semantic', query: QUERY, limit, ...(cursor ? { cursor } : {}) });
  t.equal(r.status, 200, r.status === 200 ? 'answered' : r.text);
  return { ids: (r.body.conversations ?? []).map((x: { id: string }) => x.id), cursor: r.body.cursor ?? null };
}

/**
 * Walks the search three rows a page with each reader, running `meanwhile` once every walk has read its
 * first page, with the target: the lowest ranked conversation in progress, below the first page. Checks that
 * each walk returns the ranking read just before it began, every conversation once. Returns the target and
 * the ranking a new search finds afterwards, for the case to check that the writes did reorder it.
 */
async function walkWhile(t: Test, f: Fixture, meanwhile: (target: string) => Promise<void>): Promise<{ target: string; after: string[]; maskedAfter: string[] }> {
  const before = new Map<string, string[]>();
  const walks = new Map<string, { seen: string[]; cursor: string | null }>();
  for (const [name, get] of f.readers) {
    const ranked = (await page(t, get, f.range, '1000', null)).ids;
    t.same([...ranked].sort(), [...f.all].sort(), `${name}: every conversation matches a little`);
    before.set(name, ranked);
    const first = await page(t, get, f.range, '3', null);
    walks.set(name, { seen: first.ids, cursor: first.cursor });
  }
  const ranked = before.get('pii')!;
  const target = ranked.filter((id) => f.open.includes(id)).at(-1)!;
  t.ok(ranked.indexOf(target) >= 3, `the target ranks below the first page (${ranked.indexOf(target)})`);
  await meanwhile(target);
  for (const [name, get] of f.readers) {
    const walk = walks.get(name)!;
    for (let pages = 0; walk.cursor && pages < 20; pages++) {
      const next = await page(t, get, f.range, '3', walk.cursor);
      walk.seen.push(...next.ids);
      walk.cursor = next.cursor;
    }
    const seen = walk.seen;
    t.same(seen.filter((id, i) => seen.indexOf(id) !== i), [], `${name}: no conversation returned twice`);
    t.same(before.get(name)!.filter((id) => !seen.includes(id)), [], `${name}: no conversation of the start missed`);
    t.same(seen, before.get(name), `${name}: the walk is the ranking as it was when it began`);
  }
  const [after, maskedAfter] = await Promise.all(f.readers.map(async ([, get]) => (await page(t, get, f.range, '1000', null)).ids));
  return { target, after, maskedAfter };
}

t.test('a turn that makes an unseen conversation in progress the best match: returned once, at its rank of the start', async (t) => {
  const f = await fixture('Walk Turn Co');
  const { target, after } = await walkWhile(t, f, async (target) => {
    t.equal((await f.c.chat('respond', { conversation_id: target, message: `${QUERY} ${QUERY}` })).status, 200);
  });
  t.equal(after[0], target, 'a new search ranks it first (the walk would have missed it)');
});

t.test('the same conversation ending after that turn: its final vector holds the turn, the walk ranks it without', async (t) => {
  const f = await fixture('Walk End Co');
  const { target, after } = await walkWhile(t, f, async (target) => {
    t.equal((await f.c.chat('respond', { conversation_id: target, message: `${QUERY} ${QUERY}` })).status, 200);
    t.equal((await f.c.chat('close', { conversation_id: target })).status, 200);
    // An open one of the start ends too, with no new turn: it keeps its rank.
    t.equal((await f.c.chat('close', { conversation_id: f.open[0] })).status, 200);
  });
  t.equal(after[0], target, 'a new search ranks it first');
});

t.test('new closely matching conversations: not in the walk, and no conversation of the start pushed into a page twice', async (t) => {
  const f = await fixture('Walk New Co');
  const created: string[] = [];
  const { after } = await walkWhile(t, f, async () => {
    created.push(await chatConversation(f.c, [QUERY], true));
    created.push(await chatConversation(f.c, [QUERY]));
    created.push(await chatConversation(f.c, [QUERY], true));
  });
  t.same(after.slice(0, 3).sort(), [...created].sort(), 'a new search ranks the new ones first');
});

t.test('a turn a key without pii reads masked, added to an unseen conversation: that key still walks the ranking of the start', async (t) => {
  const f = await fixture('Walk Masked Co');
  const { target, maskedAfter } = await walkWhile(t, f, async (target) => {
    t.equal((await f.c.chat('respond', { conversation_id: target, message: 'call me back on 07700900123' })).status, 200);
  });
  // Ranked on its turns of then, none masked: nothing hidden decides its rank.
  t.notOk(maskedAfter.includes(target), 'a new search of that key leaves it out (the walk would have skipped a conversation)');
});
