import t from 'tap';
import { client } from './helpers/http.js';
import { platformFor, type Platform } from './helpers/platform.js';
import { tenant } from './helpers/tenants.js';

// What an account stores through the Agents API is bounded where each write could otherwise grow it without end:
// a real-time config page (each patch merges into it). Past the
// bound, every read and write of the thing, on threads other accounts share, grew as slow as it was large.

let p: Platform;
let api: ReturnType<typeof client>;

t.before(async () => {
  p = await platformFor(t);
  api = client(p.edge, { 'x-api-key': (await tenant(p, 'Acme')).key });
});

async function newAgent(name = 'Limits') {
  const r = await api('POST', '/v1/agents', { name });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.agentId as string;
}

const KIB = 1024;

t.test('real-time configs: a patch whose merged page would pass 256 KiB is refused as an oversized patch is, and the page is unchanged', async (t) => {
  const agentId = await newAgent();
  const page = `/v1/agents/${agentId}/real-time-configs/live`;
  // Each value 100 KiB: every patch is well within the limit, three of them merged are not.
  const value = 'v'.repeat(100 * KIB);
  t.equal((await api('PATCH', `${page}/variables`, { variables: { a: value } })).status, 200);
  t.equal((await api('PATCH', `${page}/variables`, { variables: { b: value } })).status, 200);
  const before = (await api('GET', page)).body.variables;
  t.same(Object.keys(before), ['a', 'b']);

  const oversized = await api('PATCH', `${page}/variables`, { variables: { big: 'v'.repeat(257 * KIB) } });
  const merged = await api('PATCH', `${page}/variables`, { variables: { c: value } });
  t.equal(merged.status, 400, 'the third patch, merged, would be 300 KiB');
  t.equal(merged.status, oversized.status, 'the same status as a patch over the limit');
  t.type(merged.body.message, 'string');
  t.same(merged.body.errors, [{ field: 'variables', message: 'variables must be at most 256 KiB merged into the page' }]);
  t.same(oversized.body.errors.map((e: any) => e.field), ['variables'], 'the oversized patch names the same field');
  t.match(merged.body.message, /256 KiB/);
  t.same((await api('GET', page)).body.variables, before, 'the refused patch changed nothing');

  // Patches that keep the page within the limit still merge: a value replaced, a key removed, then a new one.
  t.equal((await api('PATCH', `${page}/variables`, { variables: { a: 'w'.repeat(100 * KIB) } })).status, 200, 'replacing a value is not adding to it');
  t.equal((await api('PATCH', `${page}/variables`, { variables: { a: null } })).status, 200);
  const after = await api('PATCH', `${page}/variables`, { variables: { c: value } });
  t.equal(after.status, 200, 'room again once a key is removed');
  t.same(Object.keys(after.body.variables).sort(), ['b', 'c']);
  // Each page is bounded on its own.
  t.equal((await api('PATCH', `/v1/agents/${agentId}/real-time-configs/shared/variables`, { variables: { a: value, b: value } })).status, 200);
});
