import t from 'tap';
import fc from 'fast-check';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsKey } from './helpers/conversations.js';
import { http } from './helpers/http.js';
import { platformFor, type Platform } from './helpers/platform.js';

let p: Platform;
let c: ChatProject;
let key: string;

t.before(async () => {
  p = await platformFor(t);
  c = await chatProject(p, { name: 'Fuzz Co' });
  key = await conversationsKey(p, c);
  for (let i = 0; i < 3; i++) {
    const r = await c.chat('create', { channel: 'webchat' });
    await c.chat('respond', { conversation_id: r.body.conversation_id, message: `question ${i} about parking` });
  }
});

const NAMES = ['start_time', 'end_time', 'query_type', 'sample', 'query', 'turn_type', 'channel', 'client_env', 'variant_id', 'variant_name', 'in_progress', 'limit', 'offset', 'cursor', 'include_latency', 'language', 'phone_number', 'slice_by', 'x'];
const VALUES = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom('', 'true', 'false', '0', '1', '-1', '1000', '1001', '5000', '99999999999999999999', 'transcript', 'semantic', 'random', 'user', 'agent', 'live', 'sandbox', 'pre-release', 'variant', 'language', 'WEBCHAT', '%', '%zz', '\u0000', '\ud800'),
  fc.date({ min: new Date('0001-01-01'), max: new Date('9999-12-31'), noInvalidDate: true }).map((d) => d.toISOString()),
  fc.constantFrom('2026-11-22', '2026-11-22T10:00', '2026-13-01T00:00:00Z', '2026-11-22T10:00:00+0530', 'eyJ.AAAA', 'a.bbbbbbbbbbbbbbbbbbbbbb'),
);
const QUERY = fc.array(fc.tuple(fc.constantFrom(...NAMES), VALUES), { maxLength: 8 }).map((pairs) => {
  const sp = new URLSearchParams();
  for (const [k, v] of pairs) sp.append(k, v);
  return sp.toString();
});

t.test('any query string gets a 200 or a 4xx with error_message, never a 5xx (501 only for reserved slices)', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.constantFrom('v1', 'v2', 'v3', 'v1c'), QUERY, async (version, qs) => {
      const path = version === 'v1c'
        ? `/v1/${c.accountId}/${c.agentId}/conversations/concurrency?${qs}`
        : `/${version}/${c.accountId}/${c.agentId}/conversations?${qs}`;
      const r = await http(p.edge, 'GET', path, { headers: { 'x-api-key': key } });
      const ok = r.status === 200 || (r.status >= 400 && r.status < 500) || (r.status === 501 && version === 'v1c');
      if (!ok) t.fail(`${r.status} for ${path}: ${r.text}`);
      if (r.status !== 200 && typeof r.body?.error_message !== 'string') t.fail(`no error_message for ${path}: ${r.text}`);
      if (r.status === 200 && version !== 'v1c' && !Array.isArray(r.body?.conversations)) t.fail(`no conversations for ${path}`);
    }),
    { numRuns: 300 },
  );
  t.pass('done');
});

t.test('raw malformed query strings', async (t) => {
  for (const qs of ['%', 'limit=%ZZ', 'channel[]=a', 'channel[0]=x&channel[1]=y', 'start_time=2026-11-22T10:00:00Z&start_time=2026-11-23T10:00:00Z', '&&&', '=x', 'cursor=%00']) {
    const r = await http(p.edge, 'GET', `/v3/${c.accountId}/${c.agentId}/conversations?${qs}`, { headers: { 'x-api-key': key } });
    t.ok(r.status === 200 || r.status === 400, `${qs}: ${r.status} ${r.text.slice(0, 200)}`);
  }
});
