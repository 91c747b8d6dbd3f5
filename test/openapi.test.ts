/**
 * The OpenAPI document (`GET /openapi.json`) describes every route the edge registers, with real parameters,
 * request and response schemas and each family's security scheme, and is a valid OpenAPI 3 document
 * (@readme/openapi-parser, offline). The edge is built in-process so that its registered routes can be
 * listed (EdgeOptions.onRoute); "Authorize" works when the header a scheme names is what the edge reads.
 */
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileErrors, validate } from '@readme/openapi-parser';
import type { FastifyInstance } from 'fastify';
import { inProcessEdge, type InProcessEdge } from './helpers/in-process-edge.js';

/** Routes the document leaves out on purpose: itself, the AsyncAPI document, Swagger UI, liveness, the inspector page, Prometheus. */
const INTERNAL = [/^\/openapi\.json$/, /^\/asyncapi\.json$/, /^\/docs(\/|$)/, /^\/inspector(\/|$)/];
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const TOKEN = 'openapi-test-operator-token';

type Operation = {
  tags?: string[];
  security?: Array<Record<string, string[]>>;
  parameters?: Array<{ name: string; in: string; schema?: Record<string, unknown> }>;
  responses: Record<string, { content?: Record<string, { schema?: Record<string, unknown> }> }>;
  requestBody?: { content: Record<string, { schema?: Record<string, unknown> }> };
};
type Doc = {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, { type: string; in?: string; name?: string; scheme?: string }> };
};

const dir = mkdtempSync(join(tmpdir(), 'sb-openapi-'));
const routes: Array<{ method: string; url: string }> = [];
let built: InProcessEdge | undefined;
let edge: FastifyInstance;
let doc: Doc;

t.before(async () => {
  built = await inProcessEdge(dir, {
    operatorToken: TOKEN,
    onRoute: (r) => {
      for (const method of [r.method].flat()) routes.push({ method: method.toLowerCase(), url: r.url });
    },
  });
  edge = built.edge;
  await edge.ready();
  doc = (await edge.inject({ method: 'GET', url: '/openapi.json' })).json();
});
t.teardown(async () => {
  await built?.close();
});

/** `:param` as `{param}`, and without a trailing slash: a prefixed `/` route answers both ways. */
const openapiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/(.)\/$/, '$1');

const operations = () =>
  Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).filter(([m]) => METHODS.includes(m)).map(([method, op]) => ({ path, method, op })));

t.test('a valid OpenAPI 3 document', async (t) => {
  t.match(doc.openapi, /^3\./);
  const result = await validate(structuredClone(doc) as never);
  t.ok(result.valid, result.valid ? 'valid' : compileErrors(result));
});

t.test('every registered route is in the document', async (t) => {
  t.ok(routes.length > 40, `${routes.length} routes registered`);
  const documented = new Set(operations().map(({ path, method }) => `${method} ${openapiPath(path)}`));
  const missing = routes
    .filter((r) => r.method !== 'head' && r.method !== 'options' && !INTERNAL.some((re) => re.test(r.url)))
    .map((r) => `${r.method} ${openapiPath(r.url)}`)
    .filter((key) => !documented.has(key));
  t.same(missing, [], 'routes missing from /openapi.json');
  const registered = new Set(routes.map((r) => `${r.method} ${openapiPath(r.url)}`));
  t.same([...documented].filter((k) => !registered.has(k)), [], 'no documented operation without its route');
});

t.test('every operation names its security scheme, and the schemes are the headers the edge reads', async (t) => {
  const schemes = doc.components.securitySchemes;
  t.match(schemes, {
    operatorToken: { type: 'http', scheme: 'bearer' },
    agentsKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
    conversationsKey: { type: 'apiKey', in: 'header', name: 'x-api-key' },
    chatKey: { type: 'apiKey', in: 'header', name: 'X-API-KEY' },
    chatToken: { type: 'apiKey', in: 'header', name: 'X-TOKEN' },
    externalEventsKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key' },
    outboundToken: { type: 'apiKey', in: 'header', name: 'X-Service-Auth-Token' },
  });
  const expected = (path: string): Array<Record<string, string[]>> =>
    path === '/healthz' || path === '/metrics' ? []
    : path.startsWith('/admin/') ? [{ operatorToken: [] }]
    : path.startsWith('/v1/agents') ? [{ agentsKey: [] }]
    : path.includes('/chat/') ? [{ chatKey: [], chatToken: [] }]
    : path.startsWith('/v1/outbound-calling') ? [{ outboundToken: [] }]
    : path.includes('/conversations') ? [{ conversationsKey: [] }]
    : path.startsWith('/v1/webhook-endpoints') ? [{ alertsKey: [] }]
    : /^\/v1\/(alert-rules|alerts)(\/|$)/.test(path) ? [{ alertsKey: [] }]
    : [{ externalEventsKey: [] }];
  for (const { path, method, op } of operations()) {
    t.same(op.security, expected(path), `${method} ${path}`);
    // Credentials are the scheme's business, not parameters the user fills in.
    const headers = (op.parameters ?? []).filter((p) => p.in === 'header').map((p) => p.name.toLowerCase());
    t.notOk(headers.some((h) => ['x-api-key', 'x-token', 'authorization'].includes(h)), `${method} ${path}: no credential parameters`);
  }
  // "Try it out" after "Authorize": the bearer token and an Agents key sent as the schemes name them.
  const account = await edge.inject({ method: 'POST', url: '/admin/v1/accounts', headers: { authorization: `Bearer ${TOKEN}` }, payload: { name: 'Acme', slug: 'acme' } });
  t.equal(account.statusCode, 201);
  const key = await edge.inject({ method: 'POST', url: '/admin/v1/keys', headers: { authorization: `Bearer ${TOKEN}` }, payload: { account_id: 'acme', scope: 'agents' } });
  t.equal(key.statusCode, 201);
  const agents = await edge.inject({ method: 'GET', url: '/v1/agents', headers: { [schemes.agentsKey.name!]: key.json().key } });
  t.equal(agents.statusCode, 200);
});

t.test('real query parameters and response schemas (no bogus type/additionalProperties, no {})', async (t) => {
  for (const { path, method, op } of operations()) {
    const names = (op.parameters ?? []).map((p) => p.name);
    t.notOk(names.includes('type') || names.includes('additionalProperties'), `${method} ${path}: parameters ${names.join(', ')}`);
    for (const [status, response] of Object.entries(op.responses)) {
      if (!status.startsWith('2') || status === '204') continue;
      // Bytes of another type where the route says so: a recording's WAV, the Prometheus exposition.
      const other = path.endsWith('/audio') ? 'audio/wav' : path === '/metrics' ? 'text/plain; version=0.0.4' : null;
      const schema = response.content?.['application/json']?.schema ?? (other ? response.content?.[other]?.schema : undefined);
      t.ok(schema && Object.keys(schema).length > 0, `${method} ${path} ${status} has a response schema`);
    }
    if (method === 'post' || method === 'put' || method === 'patch') {
      const hasBody = op.requestBody && Object.values(op.requestBody.content).some((c) => c.schema && Object.keys(c.schema).length > 0);
      const bodiless = /\/(merge|promote|rollback|rebuild|rotate-secret|redeliver)$|\/webhook-endpoints\/{id}\/test$|\/chat\/close$/.test(path) || op.requestBody !== undefined;
      t.ok(hasBody || bodiless, `${method} ${path} documents its body`);
    }
  }
  const query = (path: string, method = 'get') => (doc.paths[path][method].parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name).sort();
  t.same(query('/{version}/{account_id}/{project_id}/conversations'), [
    'channel', 'client_env', 'cursor', 'end_time', 'in_progress', 'include_context_state', 'include_latency', 'include_turn_metadata',
    'limit', 'offset', 'query', 'query_type', 'sample', 'start_time', 'turn_type', 'variant_id', 'variant_name',
  ].sort());
  t.same(query('/{version}/{account_id}/{project_id}/conversations/concurrency'), [
    'client_env', 'end_time', 'language', 'phone_number', 'slice_by', 'start_time', 'variant_id', 'variant_name',
  ].sort());
  const concurrency = doc.paths['/{version}/{account_id}/{project_id}/conversations/concurrency'].get.parameters!;
  t.match(concurrency.filter((p) => p.name === 'start_time' || p.name === 'end_time'), [{ required: true }, { required: true }]);
  t.same(query('/v1/external-events/webhook', 'post'), ['account_id', 'event_id_location', 'event_id_path', 'project_id']);
  const list = doc.paths['/{version}/{account_id}/{project_id}/conversations'].get.responses['200'].content!['application/json'].schema!;
  t.match(JSON.stringify(list), '"conversations"');
  t.match(JSON.stringify(list), '"cursor"');
  t.same(Object.keys(doc.paths['/v1/external-events/webhook'].post.requestBody!.content).sort(), ['application/json', 'application/x-www-form-urlencoded', 'application/xml', 'text/plain']);
  // The audio endpoint answers a WAV file, whole or a range: documented as such, not as JSON.
  const audio = doc.paths['/{version}/{account_id}/{project_id}/conversations/{conversation_id}/audio'].get.responses;
  for (const status of ['200', '206']) {
    t.same(Object.keys(audio[status].content ?? {}), ['audio/wav'], `audio ${status}: audio/wav only`);
    t.match(audio[status].content!['audio/wav'].schema, { type: 'string', format: 'binary' });
  }
});

t.test("each route documents its family's statuses, at the contract's paths", async (t) => {
  const paths = Object.keys(doc.paths);
  t.same(paths.filter((p) => p.endsWith('/') && p !== '/'), [], 'no path with a trailing slash (the contract writes none)');
  t.ok(doc.paths['/v1/webhook-endpoints']?.post && doc.paths['/v1/webhook-endpoints']?.get, 'the webhook endpoints collection at its own path');
  // Contract 7.2: the Alerts family has no 403 (a key of another scope is a 401).
  const alerts = operations().filter(({ path }) => /^\/v1\/(alert-rules|alerts|webhook-endpoints)(\/|$)/.test(path));
  t.ok(alerts.length >= 10, `${alerts.length} Alerts operations`);
  t.same(alerts.filter(({ op }) => op.responses['403']).map(({ method, path }) => `${method} ${path}`), [], 'no Alerts operation documents a 403');
  // What asks a delivery actor may time out (WEBHOOKS_DELIVERY_TIMEOUT).
  for (const path of ['/v1/webhook-endpoints/{id}/deliveries/{delivery_id}/redeliver', '/v1/webhook-endpoints/{id}/test']) t.ok(doc.paths[path].post.responses['503'], `${path}: 503`);
  // Contract 7.3: the concurrency route's 500 and 501.
  const concurrency = doc.paths['/{version}/{account_id}/{project_id}/conversations/concurrency'].get.responses;
  t.ok(concurrency['500'] && concurrency['501'], 'concurrency: 500 and 501');
});
