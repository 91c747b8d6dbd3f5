/**
 * Property tests of the Chat API's input handling: whatever body or credentials a client sends, the answer
 * is a 2xx or a 4xx in the family's `{error_message}` shape, never a 5xx, and nothing is recorded for a
 * refused request.
 */
import t from 'tap';
import fc from 'fast-check';
import type { Store } from '../store/mod.js';
import { conversationRecords } from '../actors/conversation/record.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { http } from './helpers/http.js';
import { waitForProjections } from './helpers/projections.js';
import { removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';

let p: Platform;
let c: ChatProject;
let store: Store;

t.before(async () => {
  ({ p, store } = await startPlatformWithStore());
  c = await chatProject(p, {});
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

const shaped = (status: number, body: any, allowed: number[]) => {
  if (!allowed.includes(status)) throw new Error(`status ${status}: ${JSON.stringify(body)}`);
  if (status >= 400 && typeof body?.error_message !== 'string') throw new Error(`no error_message: ${JSON.stringify(body)}`);
  return true;
};
const count = async () => {
  await waitForProjections(p);
  return (await conversationRecords(store).find({})).length;
};

t.test('respond and close: any JSON body is a 400 or 404, and nothing is recorded', async (t) => {
  const before = await count();
  for (const op of ['respond', 'close'] as const) {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.jsonValue(), fc.dictionary(fc.constantFrom('conversation_id', 'message', 'metadata', 'integration_attributes', 'asr_lang_code'), fc.jsonValue())), async (body) => {
        const r = await c.chat(op, body ?? undefined);
        return shaped(r.status, r.body, [400, 404]);
      }),
      { numRuns: 60 },
    );
  }
  t.equal(await count(), before, 'no conversation appeared');
});

t.test('create: any JSON body is a 200 or a 400; refused ones record nothing', async (t) => {
  let created = 0;
  const before = await count();
  await fc.assert(
    fc.asyncProperty(
      fc.dictionary(fc.constantFrom('channel', 'variant_id', 'asr_lang_code', 'tts_lang_code', 'initial_message', 'integration_attributes'), fc.jsonValue(), { maxKeys: 3 }),
      async (body) => {
        const r = await c.chat('create', body);
        if (r.status === 200) created++;
        return shaped(r.status, r.body, [200, 400]);
      },
    ),
    { numRuns: 60 },
  );
  t.equal(await count(), before + created, 'exactly the accepted creates were recorded');
});

t.test('unparseable JSON and other content types', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.string({ minLength: 1, maxLength: 30 }).filter((s) => { try { JSON.parse(s); return false; } catch { return s.trim() !== ''; } }), async (raw) => {
      const r = await http(p.edge, 'POST', `/v1/${c.accountId}/${c.agentId}/chat/respond`, { raw, headers: { 'X-API-KEY': c.chatKey, 'X-TOKEN': c.token, 'content-type': 'application/json' } });
      return shaped(r.status, r.body, [400]);
    }),
    { numRuns: 40 },
  );
  const xml = await http(p.edge, 'POST', `/v1/${c.accountId}/${c.agentId}/chat/create`, { raw: '<x/>', headers: { 'X-API-KEY': c.chatKey, 'X-TOKEN': c.token, 'content-type': 'application/xml' } });
  t.ok(shaped(xml.status, xml.body, [400]));
});

t.test('junk credentials are 401', async (t) => {
  const junk = fc.stringMatching(/^[\x21-\x7e]{0,60}$/);
  await fc.assert(
    fc.asyncProperty(junk, junk, async (key, token) => {
      const r = await c.chat('create', {}, { key, token });
      return shaped(r.status, r.body, [401]);
    }),
    { numRuns: 60 },
  );
  t.pass();
});
