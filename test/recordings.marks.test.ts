/**
 * `conv.mark_pii(value)`: a function marks a value as personal data. Through real chat turns: the value is
 * masked in the transcript a key without the `pii` permission reads (the project's `pii_redaction` is on by
 * default) and shown to a key with it; it appears in no response as a marked value; bad arguments are refused
 * inside the sandbox (a function error), never a crash. The muting of recordings over marked values uses the
 * same rules (`test/recordings.units.test.ts`: `textKinds` with marked values).
 */
import t from 'tap';
import fc from 'fast-check';
import { platformFor, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';
import { http } from './helpers/http.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { waitForProjections } from './helpers/projections.js';

const FUNCTIONS = {
  turn: `function turn(conv, message) {
    const m = /member (\\w+)/.exec(message);
    if (m) conv.mark_pii(m[1]);
    if (message.startsWith('bad:')) conv.mark_pii(message.slice(4) === 'empty' ? '' : 'x'.repeat(300));
    return 'noted';
  }`,
};

let p: Platform;
let c: ChatProject;
let plainKey: string;
let piiKey: string;
t.before(async () => {
  p = await platformFor(t);
  c = await chatProject(p, { name: 'Marking Co', functions: FUNCTIONS });
  const a = admin(p);
  plainKey = (await a('POST', '/keys', { account_id: c.accountId, scope: 'conversations', project_id: c.agentId, permissions: ['conversations_data'] })).body.key;
  piiKey = (await a('POST', '/keys', { account_id: c.accountId, scope: 'conversations', project_id: c.agentId, permissions: ['conversations_data', 'pii'] })).body.key;
});

const read = async (key: string, id: string) => {
  await waitForProjections(p);
  const r = await http(p.edge, 'GET', `/v3/${c.accountId}/${c.agentId}/conversations?start_time=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}`, { headers: { 'x-api-key': key } });
  return { status: r.status, text: r.text, row: (r.body.conversations as any[]).find((x) => x.id === id) };
};

t.test('a marked value is masked for keys without pii, shown to keys with it', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: id, message: 'my member Zx81Q please' })).status, 200);
  t.equal((await c.chat('respond', { conversation_id: id, message: 'and the weather?' })).status, 200);
  const plain = await read(plainKey, id);
  t.equal(plain.status, 200);
  t.notMatch(plain.text, 'Zx81Q', 'the value is in no response of a key without pii');
  t.equal(plain.row.turns.find((x: any) => x.user_input.includes('[redacted]') || x.user_input === '[redacted]')?.user_input, '[redacted]', 'the turn that said it is masked');
  t.ok(plain.row.turns.some((x: any) => x.user_input === 'and the weather?'), 'other turns are not');
  const full = await read(piiKey, id);
  t.ok(full.row.turns.some((x: any) => x.user_input === 'my member Zx81Q please'), 'a pii key reads it');
});

t.test('bad values are refused in the sandbox: a function error, never a crash', async (t) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  for (const m of ['bad:empty', 'bad:long']) t.equal((await c.chat('respond', { conversation_id: id, message: m })).status, 200, m);
  await waitForProjections(p);
  const rec = await http(p.edge, 'GET', `/v3/${c.accountId}/${c.agentId}/conversations?start_time=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}`, { headers: { 'x-api-key': piiKey } });
  const row = (rec.body.conversations as any[]).find((x) => x.id === id);
  t.ok(row, 'the conversation goes on and is recorded');
  await fc.assert(
    fc.asyncProperty(fc.string({ maxLength: 40 }), async (word) => {
      const r = await c.chat('respond', { conversation_id: id, message: `member ${word}` });
      return r.status === 200;
    }),
    { numRuns: 25 },
  );
});
