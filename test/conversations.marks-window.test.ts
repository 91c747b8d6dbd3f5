/**
 * A value a function marks as personal data (`conv.mark_pii`) is never shown raw to a key without `pii`, not
 * even for a moment (docs/recordings.md, Marked values). The marks mask the turn that said the value, so they
 * must be readable no later than that turn: they are written by the `conversations` projector, in the same
 * batch as the turns and before them (DESIGN.md, Journal and projections). Were they a read model of their own,
 * projected beside the turns, the Conversations API would show the turn raw, and transcript search would find
 * it by the value, until that other projection caught up: after a turn, while it failed or fell behind, and
 * while an operator rebuilt it.
 *
 * Through the real platform as a client: chat turns, then the Conversations API read at once and again and
 * again (never after waiting for the projections), with a key without `pii`; and every projection rebuilt by
 * the admin API while that key reads.
 */
import t, { type Test } from 'tap';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsKey, MARKING_FUNCTIONS, toQuery } from './helpers/conversations.js';
import { http } from './helpers/http.js';
import { platformFor, type Platform } from './helpers/platform.js';
import { waitForProjections } from './helpers/projections.js';


let p: Platform;
let c: ChatProject;
let key: string;
const since = new Date(Date.now() - 60_000).toISOString();
const until = new Date(Date.now() + 3_600_000).toISOString();

t.before(async () => {
  p = await platformFor(t);
  c = await chatProject(p, { name: 'Window Co', functions: MARKING_FUNCTIONS });
  key = await conversationsKey(p, c, ['conversations_data']);
});

/** A v3 read with the key without `pii`, at once (no wait for the projections). */
async function read(query: Record<string, string>) {
  const r = await http(p.edge, 'GET', `/v3/${c.accountId}/${c.agentId}/conversations?${toQuery({ start_time: since, end_time: until, ...query })}`, { headers: { 'x-api-key': key } });
  if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
  return r;
}

/**
 * Reads the transcript (checked for every value) and searches for each of `searched`, over and over, until `done` says so after at least
 * `minRounds` (or 400 rounds), and
 * asserts no answer shows a value raw or finds a conversation by it. Returns how many rounds it read.
 */
async function neverRaw(t: Test, values: string[], searched: string[], done: (rows: any[]) => boolean, minRounds = 1): Promise<number> {
  let rounds = 0;
  let leaks = 0;
  for (; rounds < 400; rounds++) {
    const [listed, ...found] = await Promise.all([read({ limit: '100' }), ...searched.map((value) => read({ query_type: 'transcript', query: value }))]);
    for (const value of values) {
      if (listed.text.includes(value)) leaks++;
    }
    for (const [i, s] of found.entries()) {
      if (s.body.conversations.length > 0 || s.text.includes(searched[i])) leaks++;
    }
    if (rounds + 1 >= minRounds && done(listed.body.conversations)) break;
  }
  t.equal(leaks, 0, `no answer of ${rounds + 1} rounds showed a marked value raw or found a conversation by it`);
  return rounds;
}

t.test('right after the turns that mark them, the values are masked in the transcript and not found by search', async (t) => {
  // Several conversations marking at once: their entries reach the projections in one batch.
  const ids = await Promise.all(Array.from({ length: 8 }, async () => (await c.chat('create', {})).body.conversation_id as string));
  const values: string[] = [];
  for (let round = 0; round < 6; round++) {
    const now = ids.map((_, k) => `Mk${round}y${k}x${Math.random().toString(36).slice(2, 8)}`);
    values.push(...now);
    const answers = await Promise.all(ids.map((id, k) => c.chat('respond', { conversation_id: id, message: `my member code ${now[k]} please` })));
    t.ok(answers.every((r) => r.status === 200), 'every turn answered');
    // Until every row holds this round's turn: every answer before and at that moment must mask them.
    await neverRaw(t, values, now, (rows) => ids.every((id) => (rows.find((x) => x.id === id)?.turns.length ?? 0) >= round + 2));
  }
  const rows = (await read({ limit: '100' })).body.conversations.filter((x: any) => ids.includes(x.id));
  t.equal(rows.length, ids.length, 'every conversation listed');
  t.ok(rows.every((row: any) => row.turns.filter((x: any) => x.user_input === '[redacted]').length === 6), 'every marking turn is read masked');
});

t.test('while any projection is rebuilt, the value stays masked', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id as string;
  const values = ['RbQ7w2', 'RbZ3k9'];
  for (const value of values) t.equal((await c.chat('respond', { conversation_id: id, message: `my member code ${value} please` })).status, 200);
  await c.chat('close', { conversation_id: id });
  await waitForProjections(p);
  const auth = { authorization: `Bearer ${p.operatorToken}` };
  const names: string[] = (await http(p.edge, 'GET', '/admin/v1/runtime/projections', { headers: auth })).body.projections.map((x: any) => x.name);
  t.ok(names.includes('conversations'), 'the conversations projection is listed');
  for (const name of names) {
    const rebuilt = await http(p.edge, 'POST', `/admin/v1/runtime/projections/${name}/rebuild`, { headers: auth });
    t.equal(rebuilt.status, 202, `${name}: ${rebuilt.text}`);
    // Until the rebuilt projection shows the conversation again, masked (and a while: another's replay is unseen here).
    await neverRaw(t, values, values, (rows) => rows.find((x) => x.id === id)?.turns.filter((x: any) => x.user_input === '[redacted]').length === 2, 25);
    await waitForProjections(p);
  }
});
