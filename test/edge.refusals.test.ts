/**
 * What the edge answers before a route's own checks: URLs the router refuses and requests Node's parser
 * refuses, in the family's error shape (never Fastify's own body); credentials checked before the body, so
 * that a caller without valid credentials learns nothing about its body; and validation errors of the
 * `{error_message}` families naming their fields.
 */
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import t, { type Test } from 'tap';
import fc from 'fast-check';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { externalKey } from './helpers/external-events.js';
import { http } from './helpers/http.js';
import { platformFor, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';

let p: Platform;
let c: ChatProject;
let agentsKey: string;
let conversationsKey: string;
t.before(async () => {
  p = await platformFor(t);
  c = await chatProject(p);
  agentsKey = (await admin(p)('POST', '/keys', { account_id: c.accountId, scope: 'agents' })).body.key;
  conversationsKey = (await admin(p)('POST', '/keys', { account_id: c.accountId, scope: 'conversations', project_id: c.agentId, permissions: ['conversations_data'] })).body.key;
});

const fieldsShape = (t: Test, body: any) => {
  t.type(body.message, 'string');
  t.ok(Array.isArray(body.errors) && body.errors.every((e: any) => typeof e.field === 'string' && typeof e.message === 'string'), '{message, errors: [{field, message}]}');
  t.notOk('code' in body || 'statusCode' in body, "not Fastify's own body");
};
const errorMessageShape = (t: Test, body: any) => {
  t.type(body.error_message, 'string', '{error_message}');
  t.notOk('code' in body || 'statusCode' in body, "not Fastify's own body");
};

t.test('the edge starts without a framework warning (its router options are the current ones)', async (t) => {
  t.notMatch(p.stderr(), /FSTDEP|DeprecationWarning|FastifyWarning/);
});

t.test('a path segment that is not valid percent-encoding: 400 in the family shape', async (t) => {
  const agents = await http(p.edge, 'GET', '/v1/agents/%zz', { headers: { 'x-api-key': 'any' } });
  t.equal(agents.status, 400);
  fieldsShape(t, agents.body);
  t.equal(agents.body.message, 'the URL is malformed: a path segment is not valid percent-encoding');
  const concurrency = await http(p.edge, 'GET', `/v1/${c.accountId}/%FF/conversations/concurrency?start_time=2026-12-01T00:00:00Z&end_time=2026-12-02T00:00:00Z`);
  t.equal(concurrency.status, 400);
  errorMessageShape(t, concurrency.body);
});

t.test('a long path id reaches its route: credentials first, then the family\'s answer to the id', async (t) => {
  const long = 'a'.repeat(300);
  const agentsNoKey = await http(p.edge, 'GET', `/v1/agents/${long}`);
  t.equal(agentsNoKey.status, 401, 'Agents: no key is 401 whatever the id');
  const agents = await http(p.edge, 'PATCH', `/v1/agents/${long}/real-time-configs/x/variables`, { body: { variables: {} }, headers: { 'x-api-key': agentsKey } });
  t.equal(agents.status, 422, 'Agents: an id past 128 characters is malformed (contract 7.1)');
  fieldsShape(t, agents.body);
  const statusNoToken = await http(p.edge, 'GET', `/v1/outbound-calling/OUT-${long}/status`);
  t.equal(statusNoToken.status, 401, 'Outbound status: no token is 401');
  const conversations = `/v3/${c.accountId}/${long}/conversations`;
  t.equal((await http(p.edge, 'GET', conversations)).status, 401, 'Conversations: no key is 401 whatever the id');
  const unknown = await http(p.edge, 'GET', conversations, { headers: { 'x-api-key': conversationsKey } });
  t.equal(unknown.status, 404, 'Conversations: a project id no one was given is not found');
  errorMessageShape(t, unknown.body);
  const audio = await http(p.edge, 'GET', `/v3/${c.accountId}/${c.agentId}/conversations/${'é'.repeat(200)}/audio`, { headers: { 'x-api-key': conversationsKey } });
  t.equal(audio.status, 404, 'audio: a conversation id no one was given is not found');
  errorMessageShape(t, audio.body);
});

t.test('a path segment longer than the router takes: 400 in the family shape, not 414', async (t) => {
  const status = await http(p.edge, 'GET', `/v1/outbound-calling/OUT-${'a'.repeat(5000)}/status`, { headers: { 'x-service-auth-token': 'x' } });
  t.equal(status.status, 400);
  errorMessageShape(t, status.body);
  t.equal(status.body.error_message, 'a path segment is longer than 4096 characters');
  const agents = await http(p.edge, 'PATCH', `/v1/agents/${'c'.repeat(5000)}/real-time-configs/x/variables`, { body: {}, headers: { 'x-api-key': 'any' } });
  t.equal(agents.status, 400);
  fieldsShape(t, agents.body);
});

/**
 * One raw request over a socket; the whole answer as text. `halfClose`: end the writing side after the request.
 * Node's server then ends its own side too, so an answer not written by then is lost: for a route that takes
 * a while, send `Connection: close` and keep the socket open.
 */
function raw(request: string, halfClose = true): Promise<string> {
  const url = new URL(p.edge);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => (halfClose ? socket.end(request) : socket.write(request)));
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (d) => (text += d));
    socket.on('close', () => resolve(text));
    socket.on('error', (err) => (text ? resolve(text) : reject(err)));
  });
}

t.test("headers larger than Node takes, or a request that is not HTTP: a body in both shapes, the connection closed", async (t) => {
  const big = await raw(`GET /v1/agents HTTP/1.1\r\nHost: x\r\nx-api-key: ${'k'.repeat(20_000)}\r\n\r\n`);
  t.match(big, /^HTTP\/1\.1 431 /);
  const body = JSON.parse(big.slice(big.indexOf('\r\n\r\n') + 4));
  fieldsShape(t, body);
  errorMessageShape(t, body);
  const garbage = await raw('NOT HTTP AT ALL\r\n\r\n');
  t.match(garbage, /^HTTP\/1\.1 400 /);
  errorMessageShape(t, JSON.parse(garbage.slice(garbage.indexOf('\r\n\r\n') + 4)));
});

/** The status and the parsed body of a raw answer. */
const answer = (res: string) => ({ status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(res)?.[1]), body: JSON.parse(res.slice(res.indexOf('\r\n\r\n') + 4)) });

t.test('an empty body counts as none however it is framed or labelled; one that is not empty must be JSON', async (t) => {
  const post = (path: string, headers: string, body = '') =>
    raw(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${agentsKey}\r\n${headers}Connection: close\r\n\r\n${body}`, false).then(answer);
  // A route that takes no body, on a branch no one made: served, it answers 404 branch not found.
  const nothing = `/v1/agents/${c.agentId}/branches/no-such-branch/merge`;
  const served = { status: 404, body: { message: 'branch not found', errors: [{ field: 'branch', message: 'branch not found' }] } };
  t.same(await post(nothing, 'Content-Length: 0\r\n'), served, 'Content-Length: 0');
  t.same(await post(nothing, 'Transfer-Encoding: chunked\r\n', '0\r\n\r\n'), served, 'chunked and empty, no Content-Type');
  t.same(await post(nothing, 'Content-Type: text/plain\r\nContent-Length: 0\r\n'), served, 'text/plain and empty');
  t.same(await post(nothing, 'Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n'), served, 'a form, chunked and empty (curl -d "")');
  const refused = (type: string) => {
    const message = `Content-Type must be application/json, not ${type}`;
    return { status: 400, body: { message, errors: [{ field: 'body', message }] } };
  };
  t.same(await post(nothing, 'Transfer-Encoding: chunked\r\n', '2\r\n{}\r\n0\r\n\r\n'), refused('none'), 'chunked, not empty, no Content-Type');
  t.same(await post(nothing, 'Content-Length: 2\r\n', '{}'), refused('none'), 'Content-Length: 2, no Content-Type');
  t.same(await post(nothing, 'Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n', '1\r\nx\r\n0\r\n\r\n'), refused('text/plain'), 'text/plain, chunked, not empty');
  t.equal((await post('/v1/agents/x/no/such/route', 'Content-Type: text/plain\r\nContent-Length: 1\r\n', 'x')).status, 404, 'a path no route has is a 404 whatever the body');
  // And a merge that happens.
  t.equal((await c.api('POST', `/v1/agents/${c.agentId}/branches`, { name: 'empty-chunked' })).status, 201);
  const merged = await post(`/v1/agents/${c.agentId}/branches/empty-chunked/merge`, 'Transfer-Encoding: chunked\r\n', '0\r\n\r\n');
  t.same([merged.status, merged.body.merged], [200, true], 'merged, from an empty chunked body');
});

t.test('a body with a content coding, or a transfer coding other than chunked, is refused in the family shape, naming it', async (t) => {
  const body = JSON.stringify({ name: 'Encoded', description: 'd' });
  const agentCount = async () => (await c.api('GET', '/v1/agents')).body.agents.length;
  const before = await agentCount();
  const create = (headers: Record<string, string>, raw: string | Uint8Array<ArrayBuffer> = body) =>
    http(p.edge, 'POST', '/v1/agents', { raw, headers: { 'x-api-key': agentsKey, 'content-type': 'application/json', ...headers } });
  const contentRefused = (coding: string) => {
    const message = `Content-Encoding ${coding} is not supported: send the body without a content coding`;
    return { message, errors: [{ field: 'content-encoding', message }] };
  };
  const gzipped = await create({ 'content-encoding': 'gzip' }, new Uint8Array(gzipSync(body)));
  t.same([gzipped.status, gzipped.body], [400, contentRefused('gzip')], 'a gzip body: the coding named, not "not valid UTF-8"');
  for (const [label, coding] of [['br', 'br'], ['compress', 'compress'], ['x-unknown', 'x-unknown'], ['gzip, gzip', 'gzip'], ['identity, GZIP', 'gzip']]) {
    const r = await create({ 'content-encoding': label }, body);
    t.same([r.status, r.body], [400, contentRefused(coding)], `a plain body labelled ${label}`);
  }
  t.equal(await agentCount(), before, 'no agent made');
  t.equal((await create({ 'content-encoding': 'identity' })).status, 201, 'identity is no coding: served');
  t.equal((await http(p.edge, 'POST', '/v1/agents', { raw: body, headers: { 'x-api-key': 'nope', 'content-type': 'application/json', 'content-encoding': 'gzip' } })).status, 401, 'credentials first');
  // Node's parser takes a chunked body with another transfer coding before chunked, and undoes the chunks only.
  const chunked = answer(
    await raw(`POST /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${agentsKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`, false),
  );
  const transfer = 'Transfer-Encoding gzip is not supported: chunked is the only transfer coding taken';
  t.same(chunked, { status: 400, body: { message: transfer, errors: [{ field: 'transfer-encoding', message: transfer }] } }, 'Transfer-Encoding: gzip, chunked');
  t.equal(await agentCount(), before + 1, 'only the identity one made');
  // The {error_message} families, the External Events webhook (with parsers of its own) included.
  const chat = await http(p.edge, 'POST', `/v1/${c.accountId}/${c.agentId}/chat/create`, { raw: '{}', headers: { 'x-api-key': c.chatKey, 'x-token': c.token, 'content-type': 'application/json', 'content-encoding': 'deflate' } });
  t.same([chat.status, chat.body], [400, { error_message: 'Content-Encoding deflate is not supported: send the body without a content coding' }], 'Chat API');
  const events = await http(p.edge, 'POST', `/v1/external-events/webhook?event_id_location=payload&event_id_path=id&account_id=${c.accountId}&project_id=${c.agentId}`, {
    raw: new Uint8Array(gzipSync('{"id":"e-1"}')),
    headers: { 'x-api-key': await externalKey(p, c), 'content-type': 'application/json', 'content-encoding': 'gzip' },
  });
  t.same([events.status, events.body], [400, { error_message: 'Content-Encoding gzip is not supported: send the body without a content coding' }], 'External Events');
});

t.test('an HTTP/1.1 request without Host, or an Expect other than 100-continue, gets the parser refusals\' body in both shapes', async (t) => {
  const both = (field: string, message: string) => ({ message, errors: [{ field, message }], error_message: message });
  const noHost = await raw(`POST /v1/agents HTTP/1.1\r\nx-api-key: ${agentsKey}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, false);
  t.same(answer(noHost), { status: 400, body: both('host', 'an HTTP/1.1 request must have a Host header') }, 'no Host: 400, before the credentials and the route');
  t.equal(answer(await raw('GET /healthz HTTP/1.0\r\n\r\n', false)).status, 200, 'HTTP/1.0 needs no Host');
  const expect = await raw('POST /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: foo\r\nConnection: close\r\n\r\n{}', false);
  t.same(answer(expect), { status: 417, body: both('expect', 'the edge meets no expectation but 100-continue') }, 'Expect: foo');
  const goOn = await raw('POST /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n{}', false);
  t.match(goOn, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 401 /, 'Expect: 100-continue is met, then the request is served');
});

t.test("an unmatched path answers in its family's shape however it is written: after ';' or '#', in absolute form", async (t) => {
  const bodyOf = (res: string) => JSON.parse(res.slice(res.indexOf('\r\n\r\n') + 4));
  for (const target of ['/v1/agents;x', '/admin;x', '/v1/alert-rules#frag', `http://127.0.0.1/v1/alert-rules/nothing/here`]) {
    const res = await raw(`SEARCH ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${agentsKey}\r\nconnection: close\r\n\r\n`);
    t.match(res, /^HTTP\/1\.1 4\d\d /, target);
    fieldsShape(t, bodyOf(res));
  }
  const chat = await raw(`SEARCH http://127.0.0.1/v1/${c.accountId}/${c.agentId}/chat/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nconnection: close\r\n\r\n`);
  t.match(chat, /^HTTP\/1\.1 404 /);
  errorMessageShape(t, bodyOf(chat));
});

t.test('credentials are checked before the body: 401 for a malformed body without valid credentials', async (t) => {
  const malformed = { raw: '{bad', headers: { 'content-type': 'application/json' } };
  const outbound = await http(p.edge, 'POST', '/v1/outbound-calling', { ...malformed, headers: { ...malformed.headers, 'x-service-auth-token': 'nope' } });
  t.equal(outbound.status, 401, 'outbound trigger');
  errorMessageShape(t, outbound.body);
  const bridge = await http(p.edge, 'POST', '/internal/v1/agentic-dial/bridge-ended', { ...malformed, headers: { ...malformed.headers, 'x-api-key': 'x' } });
  t.equal(bridge.status, 401, 'bridge-ended');
  const chat = await http(p.edge, 'POST', `/v1/${c.accountId}/${c.agentId}/chat/create`, { ...malformed, headers: { ...malformed.headers, 'x-api-key': 'x', 'x-token': 'y' } });
  t.equal(chat.status, 401, 'chat create');
  const events = await http(p.edge, 'POST', `/v1/external-events/webhook?event_id_location=payload&event_id_path=id&account_id=${c.accountId}&project_id=${c.agentId}`, {
    raw: 'x'.repeat(300_000),
    headers: { 'content-type': 'text/plain', 'x-api-key': 'x' },
  });
  t.equal(events.status, 401, 'external events: the key before the body size');
  const valid = await c.chat('create', '{bad' as unknown);
  t.not(valid.status, 401, 'with valid credentials the body is judged');
});

t.test("a body past the edge's limit is 400 in the family shape (the contract has no 413)", async (t) => {
  const big = 'x'.repeat(1024 * 1024 + 1);
  const agents = await http(p.edge, 'POST', '/v1/agents', { body: { name: 'big', description: big }, headers: { 'x-api-key': agentsKey } });
  t.equal(agents.status, 400, 'Agents API');
  fieldsShape(t, agents.body);
  t.same(agents.body, { message: 'the body is larger than 1048576 bytes', errors: [{ field: 'body', message: 'the body is larger than 1048576 bytes' }] });
  const chat = await c.chat('create', { initial_message: big });
  t.equal(chat.status, 400, 'Chat API');
  t.same(chat.body, { error_message: 'the body is larger than 1048576 bytes' });
});

t.test('a JSON body that is not UTF-8 is refused, in the family shape', async (t) => {
  const bytes = Buffer.concat([Buffer.from('{"initial_message":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
  const r = await fetch(new URL(`/v1/${c.accountId}/${c.agentId}/chat/create`, p.edge), {
    method: 'POST',
    headers: { 'x-api-key': c.chatKey, 'x-token': c.token, 'content-type': 'application/json' },
    body: bytes,
  });
  t.equal(r.status, 400);
  t.same(await r.json(), { error_message: 'body is not valid UTF-8' });
});

/** A well-formed string (any code points, pairs included). */
const wellFormed = fc.string({ unit: 'binary', maxLength: 24 });
/**
 * A well-formed string with one lone surrogate put anywhere in it. Put between the two halves of a pair, it
 * pairs with one of them and leaves the other alone: the result is never well-formed.
 */
const withLoneSurrogate = fc
  .tuple(wellFormed, fc.nat(), fc.integer({ min: 0xd800, max: 0xdfff }))
  .map(([s, at, unit]) => s.slice(0, at % (s.length + 1)) + String.fromCharCode(unit) + s.slice(at % (s.length + 1)));
/** A JSON value holding `s` somewhere: as a value or a key, at the top or nested in objects and arrays. */
const holding = (s: string) =>
  fc.constantFrom<(s: string) => unknown>(
    (x) => x,
    (x) => ({ [x]: 1 }),
    (x) => [1, { deep: [x] }],
    (x) => ({ a: { [`k${x}`]: { b: 'c' } } }),
  ).map((place) => place(s));

t.test('a JSON body with a lone surrogate anywhere is refused in the family shape, nothing stored', async (t) => {
  const page = `/v1/agents/${c.agentId}/real-time-configs/lone-surrogates`;
  await fc.assert(
    fc.asyncProperty(withLoneSurrogate.chain(holding), async (v) => {
      // JSON.stringify writes a lone surrogate as its escape (`\ud800`): the text is plain ASCII, valid UTF-8.
      const agents = await c.api('PATCH', `${page}/variables`, { variables: { v } });
      if (agents.status !== 400 || !/^body holds a lone surrogate/.test(agents.body?.message) || agents.body.errors?.[0]?.field !== 'body') throw new Error(`Agents: ${agents.status} ${agents.text}`);
      const chat = await c.chat('create', { integration_attributes: { v } });
      if (chat.status !== 400 || !/^body holds a lone surrogate/.test(chat.body?.error_message) || Object.keys(chat.body).length !== 1) throw new Error(`Chat: ${chat.status} ${chat.text}`);
      return true;
    }),
    { numRuns: 40 },
  );
  t.equal((await c.api('GET', page)).status, 404, 'the config page was never written');
  const account = await http(p.edge, 'POST', '/admin/v1/accounts', { raw: '{"name":"acct\\ud800"}', headers: { authorization: `Bearer ${p.operatorToken}`, 'content-type': 'application/json' } });
  t.equal(account.status, 400, 'admin API');
  fieldsShape(t, account.body);
  t.same(account.body.errors, [{ field: 'body', message: 'body holds a lone surrogate (U+D800 to U+DFFF outside a pair), which is not Unicode text' }]);
});

t.test('a JSON body whose strings are all well-formed is stored as sent, escaped or not', async (t) => {
  const page = `/v1/agents/${c.agentId}/real-time-configs/well-formed`;
  await fc.assert(
    fc.asyncProperty(wellFormed, wellFormed, async (s, key) => {
      const variables = { v: s, [`k${key}`]: [s, { s }] };
      const sent = await c.api('PATCH', `${page}/variables`, { variables });
      if (sent.status !== 200) throw new Error(`${sent.status} ${sent.text}`);
      const read = (await c.api('GET', page)).body.variables;
      if (JSON.stringify([read.v, read[`k${key}`]]) !== JSON.stringify([s, [s, { s }]])) throw new Error(`read back ${JSON.stringify(read)}`);
      await c.api('PATCH', `${page}/variables`, { variables: { v: null, [`k${key}`]: null } });
      return true;
    }),
    { numRuns: 30 },
  );
  // Escapes the check looks at twice: a pair (an emoji), and an escaped backslash followed by `ud800`.
  const raw = String.raw`{"variables":{"pair":"\ud83d\ude00","backslash":"\\ud800"}}`;
  const sent = await http(p.edge, 'PATCH', `${page}/variables`, { raw, headers: { 'x-api-key': agentsKey, 'content-type': 'application/json' } });
  t.equal(sent.status, 200, sent.text);
  t.same((await c.api('GET', page)).body.variables, { pair: '\u{1f600}', backslash: String.raw`\ud800` });
});

t.test("a JSON number past a double's range is refused in the family shape, not stored as null", async (t) => {
  const page = `/v1/agents/${c.agentId}/real-time-configs/large-numbers`;
  const patch = (raw: string) => http(p.edge, 'PATCH', `${page}/variables`, { raw: `{"variables":${raw}}`, headers: { 'x-api-key': agentsKey, 'content-type': 'application/json' } });
  const message = 'body holds a number out of range (larger in size than 1.7976931348623157e308, the largest double), which is not finite';
  const refused = await patch('{"max_wait":1e309,"floor":-1e400}');
  t.equal(refused.status, 400);
  t.same(refused.body, { message, errors: [{ field: 'body', message }] });
  t.equal((await c.api('GET', page)).status, 404, 'the config page was never written');
  const chat = await http(p.edge, 'POST', `/v1/${c.accountId}/${c.agentId}/chat/create`, {
    raw: '{"integration_attributes":{"n":[1E+999]}}',
    headers: { 'x-api-key': c.chatKey, 'x-token': c.token, 'content-type': 'application/json' },
  });
  t.same([chat.status, chat.body], [400, { error_message: message }], 'Chat API');
  // Either way to a large number: an exponent, or digits. Refused exactly when JSON.parse gives Infinity.
  const literal = fc.oneof(
    fc.tuple(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 280, max: 330 }), fc.constantFrom('e', 'E', 'e+', 'e0')).map(([m, e, mark]) => `${m}.5${mark}${e}`),
    fc.tuple(fc.integer({ min: 200, max: 320 }), fc.constantFrom('1', '9')).map(([n, d]) => d.repeat(n)),
  );
  await fc.assert(
    fc.asyncProperty(literal, fc.boolean(), async (text, negative) => {
      const number = `${negative ? '-' : ''}${text}`;
      const r = await patch(`{"n":${number}}`);
      const finite = Number.isFinite(JSON.parse(number));
      if (finite ? r.status !== 200 || r.body.variables.n !== JSON.parse(number) : r.status !== 400 || r.body.message !== message) throw new Error(`${number}: ${r.status} ${r.text}`);
      return true;
    }),
    { numRuns: 40 },
  );
  const largest = await patch('{"n":1.7976931348623157e308,"tiny":5e-324}');
  t.same(largest.body.variables, { n: 1.7976931348623157e308, tiny: 5e-324 }, 'the largest double and the smallest are taken');
});

t.test('a Chat API validation error names its fields in error_message', async (t) => {
  const r = await c.chat('respond', { conversation_id: 7, channel: 'pigeon' });
  t.equal(r.status, 400);
  t.match(r.body.error_message, /^validation error: /);
  t.match(r.body.error_message, /conversation_id/);
  t.comment(r.body.error_message);
});
