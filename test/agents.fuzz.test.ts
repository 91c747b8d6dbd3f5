/**
 * Property tests over every Agents and admin route listed in the platform's own OpenAPI document: malformed
 * path ids, bodies and credentials always get a 4xx in the family's error shape, never a 5xx, and leave
 * everything stored exactly as it was.
 */
import t from 'tap';
import fc from 'fast-check';
import { client, http } from './helpers/http.js';
import { platformFor, type Platform } from './helpers/platform.js';
import { admin, tenant } from './helpers/tenants.js';

type Route = { method: string; path: string; params: string[]; body: any | null };

let p: Platform;
let key: string;
let ids: Record<string, string>;
let routes: Route[];
let digest: () => Promise<string>;

t.before(async () => {
  p = await platformFor(t);
  const tn = await tenant(p, 'Fuzz');
  key = tn.key;
  const api = client(p.edge, { 'x-api-key': key });
  const agentId = (await api('POST', '/v1/agents', { name: 'Fuzzed', description: 'target' })).body.agentId;
  const base = `/v1/agents/${agentId}`;
  await api('PATCH', `${base}/branches/main/behavior`, { behavior: 'stay calm' });
  const topicId = (await api('POST', `${base}/branches/main/knowledge-base/topics`, { name: 'Hours', content: '9-5' })).body.id;
  const attributeId = (await api('POST', `${base}/branches/main/attributes`, { name: 'site' })).body.id;
  const variantId = (await api('POST', `${base}/branches/main/variants`, { name: 'Main site' })).body.id;
  const branchId = (await api('POST', `${base}/branches`, { name: 'work' })).body.branchId;
  const deploymentId = (await api('POST', `${base}/deployments/publish`, {})).body.deployment.id;
  await api('PATCH', `${base}/real-time-configs/live/variables`, { variables: { open: 9 } });
  ids = {
    agentId, branch: branchId, branchId, topicId, attributeId, variantId, deploymentId, config: 'live',
    // admin ids that exist nowhere, so a request that got through could not delete anything real
    id: 'key_AAAAAAAAAAAAAAAA', project_id: agentId,
  };
  const doc = (await http(p.edge, 'GET', '/openapi.json')).body;
  routes = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    if (!path.startsWith('/v1/agents') && !path.startsWith('/admin/v1')) continue;
    for (const [method, op] of Object.entries<any>(item)) {
      const params = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      routes.push({ method: method.toUpperCase(), path, params, body: op.requestBody?.content?.['application/json']?.schema ?? null });
    }
  }
  const adm = admin(p);
  digest = async () => {
    const parts = await Promise.all([
      api('GET', '/v1/agents'),
      api('GET', `${base}/branches`),
      api('GET', `${base}/branches/main`),
      api('GET', `${base}/branches/work`),
      api('GET', `${base}/deployments`),
      api('GET', `${base}/real-time-configs`),
      adm('GET', '/accounts'),
      adm('GET', '/keys'),
      adm('GET', '/connectors'),
      adm('GET', `/projects/${agentId}/settings`),
    ]);
    return JSON.stringify(parts.map((r) => r.body));
  };
});

const fill = (r: Route, override: Record<string, string> = {}) =>
  r.path.replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent(override[name] ?? ids[name] ?? 'x'));
const auth = (r: Route): Record<string, string> =>
  r.path.startsWith('/admin') ? { authorization: `Bearer ${p.operatorToken}` } : { 'x-api-key': key };

function assertShape(status: number, body: any, want: number[]): boolean {
  const shaped = body && typeof body.message === 'string' && Array.isArray(body.errors) &&
    body.errors.every((e: any) => typeof e.field === 'string' && typeof e.message === 'string');
  if (!want.includes(status) || !shaped) throw new Error(`got ${status} ${JSON.stringify(body)}, wanted ${want} in the error shape`);
  return true;
}

/** A JSON value of another type than the schema asks for. */
function wrongType(schema: any): fc.Arbitrary<unknown> {
  const type = schema?.type ?? (schema?.enum ? 'enum' : schema?.anyOf ? 'any' : 'object');
  const all: Record<string, fc.Arbitrary<unknown>> = {
    string: fc.string({ maxLength: 20 }),
    number: fc.double({ noNaN: true, noDefaultInfinity: true }),
    boolean: fc.boolean(),
    array: fc.array(fc.integer(), { maxLength: 3 }),
    object: fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }),
  };
  const types = Array.isArray(type) ? type : [type];
  const wrong = Object.entries(all).filter(([k]) => !types.includes(k) && !(k === 'number' && types.includes('integer')) && !(types.includes('null') && false));
  if (schema?.enum) return fc.string({ maxLength: 12 }).filter((s) => !schema.enum.includes(s));
  return fc.oneof(...wrong.map(([, a]) => a));
}

t.test('malformed path ids are 422 on every route', async (t) => {
  const before = await digest();
  const malformed = fc.string({ minLength: 1, maxLength: 40 }).filter((s) => !/^[A-Za-z0-9_.-]{1,128}$/.test(s));
  // A `{branch}` may be a branch's name, which may hold any printable character: only blank or control is malformed.
  const malformedBranch = fc.oneof(fc.constantFrom(' ', '  ', '\t'), fc.tuple(fc.string({ maxLength: 10 }), fc.constantFrom('\n', '\u0000', '\u007f', '\r'), fc.string({ maxLength: 10 })).map((p) => p.join('')));
  for (const r of routes.filter((x) => x.params.length)) {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...r.params).chain((param) => fc.tuple(fc.constant(param), param === 'branch' ? malformedBranch : malformed)), async ([param, value]) => {
        const res = await http(p.edge, r.method, fill(r, { [param]: value }), { headers: auth(r) });
        return assertShape(res.status, res.body, [422]);
      }),
      { numRuns: 15 },
    );
  }
  t.equal(await digest(), before, 'nothing stored changed');
});

t.test('malformed bodies are 400 on every route that takes one', async (t) => {
  const before = await digest();
  for (const r of routes.filter((x) => x.body)) {
    const props: Record<string, any> = r.body.properties ?? {};
    const names = Object.keys(props);
    const notJson = fc.string({ minLength: 1, maxLength: 30 }).filter((s) => {
      try {
        JSON.parse(s);
        return false;
      } catch {
        return s.trim() !== '';
      }
    });
    const notObject = fc.oneof(fc.integer(), fc.string({ maxLength: 10 }), fc.array(fc.integer(), { maxLength: 3 }), fc.boolean(), fc.constant(null));
    const badField = names.length
      ? fc.constantFrom(...names).chain((name) => wrongType(props[name]).map((v) => JSON.stringify({ [name]: v })))
      : notObject.map((v) => JSON.stringify(v));
    await fc.assert(
      fc.asyncProperty(fc.oneof(notJson, notObject.map((v) => JSON.stringify(v)), badField), async (raw) => {
        const res = await http(p.edge, r.method, fill(r), { raw, headers: { ...auth(r), 'content-type': 'application/json' } });
        return assertShape(res.status, res.body, [400]);
      }),
      { numRuns: 25 },
    );
  }
  t.equal(await digest(), before, 'nothing stored changed');
});

t.test('bad credentials are 401, other content types 400 (no error table lists 415), on every route', async (t) => {
  const before = await digest();
  const junk = fc.stringMatching(/^[\x21-\x7e]{0,60}$/);
  for (const r of routes) {
    await fc.assert(
      fc.asyncProperty(junk, async (value) => {
        const headers: Record<string, string> = r.path.startsWith('/admin') ? { authorization: `Bearer ${value}` } : { 'x-api-key': value };
        const res = await http(p.edge, r.method, fill(r), { headers, body: r.body ? {} : undefined });
        return assertShape(res.status, res.body, [401]);
      }),
      { numRuns: 10 },
    );
    if (r.body) {
      const res = await http(p.edge, r.method, fill(r), { raw: '<xml/>', headers: { ...auth(r), 'content-type': 'application/xml' } });
      assertShape(res.status, res.body, [400]);
    }
  }
  t.equal(await digest(), before, 'nothing stored changed');
});
