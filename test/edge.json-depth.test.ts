/**
 * JSON bodies nested deeper than JSON_MAX_DEPTH are a 400 in each family's error shape on the Chat API
 * (`{error_message}`), the Agents API and the admin API (`{message, errors}`), never a 500; bodies at or below
 * the limit are served. Property-based: random documents of random depth, with strings full of brackets,
 * quotes and backslashes (which the depth scan must skip).
 */
import t from 'tap';
import fc from 'fast-check';
import type { Store } from '../store/mod.js';
import { conversationRecords } from '../actors/conversation/record.js';
import { JSON_MAX_DEPTH, jsonTooDeep } from '../platform/json-depth.js';
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

/** Strings that look like JSON structure. */
const tricky = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', ',', ':', 'a', ' ', 'é') , maxLength: 12 });
const leaf = fc.oneof(tricky, fc.integer(), fc.boolean(), fc.constant(null));

/** A value nested exactly `depth` levels (arrays and objects mixed, with leaf siblings at each level). */
const nested = (depth: number) =>
  fc.tuple(fc.array(fc.tuple(fc.boolean(), tricky, leaf), { minLength: depth, maxLength: depth }), leaf).map(([levels, inner]) => {
    let v: unknown = inner;
    for (const [isArray, key, sibling] of levels) v = isArray ? [sibling, v] : { [`k${key}`]: v, s: sibling };
    return v;
  });

/** A depth and a value of that depth; depths cluster around the limit, where mistakes would be. */
const valueOfDepth = (min: number, max: number) => fc.integer({ min, max }).chain((d) => nested(d).map((v) => ({ d, v })));

t.test('the scan agrees with the structure: exactly the documents deeper than the limit', async (t) => {
  fc.assert(
    fc.property(valueOfDepth(1, JSON_MAX_DEPTH + 20), ({ d, v }) => jsonTooDeep(JSON.stringify(v)) === d > JSON_MAX_DEPTH),
    { numRuns: 500 },
  );
  t.notOk(jsonTooDeep('"' + '['.repeat(10_000) + '"'), 'brackets inside a string do not count');
  t.ok(jsonTooDeep('['.repeat(1_000_000)), 'a million levels: no stack overflow');
});

const conversations = async () => {
  await waitForProjections(p);
  return (await conversationRecords(store).find({})).length;
};

t.test('Chat API: at or below the limit served, above it a 400 {error_message}', async (t) => {
  let created = 0;
  const before = await conversations();
  // The body is one level and integration_attributes another: the value adds d.
  await fc.assert(
    fc.asyncProperty(valueOfDepth(JSON_MAX_DEPTH - 6, JSON_MAX_DEPTH + 6), async ({ d, v }) => {
      const r = await c.chat('create', { integration_attributes: { v } });
      const deep = d + 2 > JSON_MAX_DEPTH;
      if (deep) {
        if (r.status !== 400 || typeof r.body?.error_message !== 'string' || !/deeper than 64 levels/.test(r.body.error_message)) throw new Error(`${d + 2}: ${r.status} ${r.text}`);
      } else if (r.status !== 200) throw new Error(`${d + 2}: ${r.status} ${r.text}`);
      else created++;
      return true;
    }),
    { numRuns: 30 },
  );
  const huge = await http(p.edge, 'POST', `/v1/${c.accountId}/${c.agentId}/chat/create`, {
    raw: `{"integration_attributes":{"v":${'['.repeat(200_000)}${']'.repeat(200_000)}}}`,
    headers: { 'X-API-KEY': c.chatKey, 'X-TOKEN': c.token, 'content-type': 'application/json' },
  });
  t.equal(huge.status, 400, 'two hundred thousand levels: a 400, not a 500');
  t.same(Object.keys(huge.body), ['error_message']);
  t.equal(await conversations(), before + created, 'exactly the accepted creates were recorded');
});

t.test('Agents and admin APIs: above the limit a 400 {message, errors}', async (t) => {
  const variables = (v: unknown) => c.api('PATCH', `/v1/agents/${c.agentId}/real-time-configs/live/variables`, { variables: { v } });
  const account = (v: unknown) => http(p.edge, 'POST', '/admin/v1/accounts', { body: { name: 'Deep Co', extra: v }, headers: { authorization: `Bearer ${p.operatorToken}` } });
  const shaped = (r: { status: number; body: any; text: string }, what: string) => {
    if (r.status !== 400 || typeof r.body?.message !== 'string' || !Array.isArray(r.body?.errors) || r.body.errors[0]?.field !== 'body') throw new Error(`${what}: ${r.status} ${r.text}`);
  };
  await fc.assert(
    fc.asyncProperty(valueOfDepth(JSON_MAX_DEPTH - 6, JSON_MAX_DEPTH + 6), async ({ d, v }) => {
      // Body, variables: two levels before the value; body: one before `extra`.
      const rv = await variables(v);
      if (d + 2 > JSON_MAX_DEPTH) shaped(rv, `variables ${d + 2}`);
      else if (rv.status !== 200) throw new Error(`variables ${d + 2}: ${rv.status} ${rv.text}`);
      const ra = await account(v);
      if (d + 1 > JSON_MAX_DEPTH) shaped(ra, `accounts ${d + 1}`);
      else if (ra.status !== 201) throw new Error(`accounts ${d + 1}: ${ra.status} ${ra.text}`);
      return true;
    }),
    { numRuns: 30 },
  );
  t.pass('60 requests');
});
