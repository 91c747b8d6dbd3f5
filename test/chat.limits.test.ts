/**
 * Chat API rate limits (token buckets per API key and per project): past a bucket the answer is a 429 in the
 * family's `{error_message}` shape with a `Retry-After` header; refused credentials spend nothing; another
 * project's traffic is untouched. The buckets are configured tiny and refill too slowly to matter here.
 */
import t, { type Test } from 'tap';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { admin } from './helpers/tenants.js';
import { platformFor, type Platform } from './helpers/platform.js';

let p: Platform;
let c: ChatProject;

t.before(async () => {
  p = await platformFor(t, {
    env: { CHAT_RATE_PER_KEY: '0.001', CHAT_BURST_PER_KEY: '3', CHAT_RATE_PER_PROJECT: '0.001', CHAT_BURST_PER_PROJECT: '5' },
  });
  c = await chatProject(p, {});
});

const limited = (t: Test, r: { status: number; body: any; headers: Headers }, what: RegExp) => {
  t.equal(r.status, 429, JSON.stringify(r.body));
  t.match(r.body, { error_message: what });
  t.same(Object.keys(r.body), ['error_message'], 'the family error shape');
  const retry = Number(r.headers.get('retry-after'));
  t.ok(Number.isInteger(retry) && retry >= 1, `Retry-After is whole seconds (${r.headers.get('retry-after')})`);
};

t.test('per key, then per project, and another project is untouched', async (t) => {
  // The key's own record id with a wrong secret: well-formed, so the edge looks the key up and refuses it.
  const wrongSecret = `${c.chatKey.slice(0, 'sbk_key_'.length + 16)}_${'x'.repeat(32)}`;
  t.not(wrongSecret, c.chatKey);
  for (let i = 0; i < 5; i++) {
    t.equal((await c.chat('create', {}, { key: wrongSecret })).status, 401, 'a wrong secret for the key is 401 and spends none of its tokens');
  }

  const created = await c.chat('create', {});
  t.equal(created.status, 200, created.text);
  const id = created.body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hours?' })).status, 200);
  t.equal((await c.chat('respond', { conversation_id: id, message: 'parking?' })).status, 200, 'the third request of the key is within its burst');
  limited(t, await c.chat('respond', { conversation_id: id, message: 'again' }), /X-API-KEY/);
  limited(t, await c.chat('close', { conversation_id: id }), /X-API-KEY/);

  // A second key of the same project has its own bucket, but the project's holds 5 in all.
  const second = await admin(p)('POST', '/keys', { account_id: c.accountId, scope: 'chat', project_id: c.agentId });
  t.equal(second.status, 201);
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hours?' }, { key: second.body.key })).status, 200);
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hours?' }, { key: second.body.key })).status, 200, 'the project is at 5');
  limited(t, await c.chat('respond', { conversation_id: id, message: 'hours?' }, { key: second.body.key }), /project/);

  const other = await chatProject(p, { name: 'Other Co' });
  const r = await other.chat('create', {});
  t.equal(r.status, 200, 'another project and key are not limited by this one');
});
