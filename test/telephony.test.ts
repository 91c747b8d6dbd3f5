/**
 * Telephony resources of the Agents API (contract 2.1): SIP trunks and E.164 phone numbers, with the Agents
 * API's keys and error shape; and the admin API's outbound connector fields that name them.
 */
import t from 'tap';
import fc from 'fast-check';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { client } from './helpers/http.js';
import { CLI, platformFor, type Platform } from './helpers/platform.js';
import { admin, tenant } from './helpers/tenants.js';

let p: Platform;
let api: ReturnType<typeof client>;
let other: ReturnType<typeof client>;
let accountId: string;

t.before(async () => {
  p = await platformFor(t);
  const a = await tenant(p, 'Acme');
  accountId = a.accountId;
  api = client(p.edge, { 'x-api-key': a.key });
  const b = await tenant(p, 'Globex');
  other = client(p.edge, { 'x-api-key': b.key });
});

const isFieldError = (t: any, body: any, field?: string) => {
  t.type(body.message, 'string', 'error has message');
  t.ok(Array.isArray(body.errors), 'error has errors[]');
  if (field) t.ok(body.errors.some((e: any) => e.field === field), `names field ${field}`);
};

async function newAgent(name = 'Phones') {
  const r = await api('POST', '/v1/agents', { name });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.agentId as string;
}

const trunk = { name: 'Carrier', host: 'sip.example.net', port: 5061, transport: 'tls', username: 'acme', password: 's3cret-pass' };

t.test('connectors: create shows no password, ever; list, read, delete', async (t) => {
  const agent = await newAgent();
  const base = `/v1/agents/${agent}/telephony/connectors`;
  const created = await api('POST', base, trunk);
  t.equal(created.status, 201);
  t.match(created.body, { name: 'Carrier', host: 'sip.example.net', port: 5061, transport: 'tls', username: 'acme', has_password: true, max_concurrent_calls: null, transfer: 'refer' });
  t.match(created.body.id, /^tc_[A-Za-z0-9]{16}$/);
  t.notOk('password' in created.body, 'create does not echo the password');
  t.notOk(created.text.includes('s3cret-pass'));

  const list = await api('GET', base);
  t.equal(list.status, 200);
  t.same(list.body.connectors.map((c: any) => c.id), [created.body.id]);
  t.notOk(list.text.includes('s3cret-pass'), 'list shows no password');
  const one = await api('GET', `${base}/${created.body.id}`);
  t.equal(one.status, 200);
  t.same(one.body, created.body);
  t.notOk(one.text.includes('s3cret-pass'), 'read shows no password');

  const bare = await api('POST', base, { name: 'Open', host: '10.0.0.5', port: 5060, transport: 'udp' });
  t.equal(bare.status, 201);
  t.match(bare.body, { username: null, has_password: false });
  const bridging = await api('POST', base, { name: 'Bridging', host: '10.0.0.6', port: 5060, transport: 'udp', transfer: 'bridge' });
  t.equal(bridging.status, 201, bridging.text);
  t.equal(bridging.body.transfer, 'bridge', 'a trunk that bridges handoffs');
  t.equal((await api('GET', `${base}/${bridging.body.id}`)).body.transfer, 'bridge', 'and reads so');

  t.equal((await api('DELETE', `${base}/${created.body.id}`)).status, 204);
  const gone = await api('GET', `${base}/${created.body.id}`);
  t.equal(gone.status, 404);
  isFieldError(t, gone.body, 'connectorId');
  t.equal((await api('DELETE', `${base}/${created.body.id}`)).status, 404, 'deleting twice is 404');
});

t.test('connectors: bad bodies are 400 in the Agents shape, malformed ids 422, other accounts 403, no key 401', async (t) => {
  const agent = await newAgent();
  const base = `/v1/agents/${agent}/telephony/connectors`;
  for (const bad of [
    {},
    { ...trunk, transport: 'sctp' },
    { ...trunk, port: 0 },
    { ...trunk, port: 70000 },
    { ...trunk, port: '5060' },
    { ...trunk, host: 'sip://x' },
    { ...trunk, name: '' },
    { ...trunk, extra: 1 },
    { ...trunk, transfer: 'blind' },
    { ...trunk, transfer: null },
  ]) {
    const r = await api('POST', base, bad);
    t.equal(r.status, 400, JSON.stringify(bad));
    isFieldError(t, r.body);
  }
  // The username is sent in the INVITE's Authorization header: a line break in it would add headers of its own.
  for (const username of ['u\r\nX-Injected: yes', 'u\nX: y', 'a"b', 'a\\b', 'tab\there', 'nul\u0000']) {
    const r = await api('POST', base, { ...trunk, username, password: 'p' });
    t.equal(r.status, 400, JSON.stringify(username));
    isFieldError(t, r.body, 'username');
  }
  t.equal((await api('POST', base, { ...trunk, username: 'ops+trunk@example.com', password: 'p' })).status, 201, 'a user name with punctuation');
  await fc.assert(
    fc.asyncProperty(fc.string({ minLength: 1, maxLength: 20, unit: 'binary' }), async (username) => {
      const r = await api('POST', base, { ...trunk, username, password: 'p' });
      // Whatever comes, never a 5xx; only a name that cannot break out of its quoted string is kept.
      if (r.status === 201) return /^[^\x00-\x1f\x7f"\\]+$/.test(username) && r.body.username === username;
      return r.status === 400;
    }),
    { numRuns: 100 },
  );
  t.equal((await api('GET', `${base}/bad%20id`)).status, 422);
  t.equal((await other('GET', base)).status, 403, 'another account’s key');
  t.equal((await client(p.edge, {})('GET', base)).status, 401);
  t.equal((await api('GET', `/v1/agents/nope/telephony/connectors`)).status, 404);
});

t.test('phone numbers: E.164 validated, bound once platform-wide, connector must be the agent’s; delete with numbers is 409', async (t) => {
  const agent = await newAgent();
  const tc = (await api('POST', `/v1/agents/${agent}/telephony/connectors`, trunk)).body.id;
  const base = `/v1/agents/${agent}/telephony/phone-numbers`;
  const created = await api('POST', base, { number: '+14155550123', connector_id: tc });
  t.equal(created.status, 201);
  t.match(created.body, { number: '+14155550123', connector_id: tc, variant_id: null });
  t.match(created.body.id, /^pn_[A-Za-z0-9]{16}$/);
  t.same((await api('GET', base)).body.phoneNumbers.map((n: any) => n.id), [created.body.id]);
  t.same((await api('GET', `${base}/${created.body.id}`)).body, created.body);

  const again = await api('POST', base, { number: '+14155550123', connector_id: tc });
  t.equal(again.status, 409, 'a number bound twice');
  isFieldError(t, again.body, 'number');
  const agent2 = await newAgent('Other');
  const tc2 = (await api('POST', `/v1/agents/${agent2}/telephony/connectors`, trunk)).body.id;
  t.equal((await api('POST', `/v1/agents/${agent2}/telephony/phone-numbers`, { number: '+14155550123', connector_id: tc2 })).status, 409, 'bound to another agent too');
  const foreign = await api('POST', base, { number: '+14155550124', connector_id: tc2 });
  t.equal(foreign.status, 400, 'another agent’s connector');
  isFieldError(t, foreign.body, 'connector_id');
  const variant = await api('POST', base, { number: '+14155550125', connector_id: tc, variant_id: 'no-such-variant' });
  t.equal(variant.status, 400);
  isFieldError(t, variant.body, 'variant_id');

  const inUse = await api('DELETE', `/v1/agents/${agent}/telephony/connectors/${tc}`);
  t.equal(inUse.status, 409, 'a connector with numbers bound is not deleted');
  isFieldError(t, inUse.body, 'connectorId');
  t.equal((await api('DELETE', `${base}/${created.body.id}`)).status, 204);
  t.equal((await api('GET', `${base}/${created.body.id}`)).status, 404);
  t.equal((await api('DELETE', `/v1/agents/${agent}/telephony/connectors/${tc}`)).status, 204, 'deletable once no number is bound');
  t.equal((await other('GET', base)).status, 403);
});

t.test('binding a number to a connector while it is deleted: never both, and no number is left on a deleted connector', async (t) => {
  const agent = await newAgent('Racing');
  const connectors = `/v1/agents/${agent}/telephony/connectors`;
  const numbers = `/v1/agents/${agent}/telephony/phone-numbers`;
  const stays = (await api('POST', connectors, { ...trunk, name: 'Stays' })).body.id;
  const moving = (await api('POST', numbers, { number: '+14155557000', connector_id: stays })).body.id;
  for (let i = 0; i < 20; i++) {
    const tc = (await api('POST', connectors, trunk)).body.id;
    const [bound, deleted] = await Promise.all([
      api('POST', numbers, { number: `+1415555${String(7100 + i)}`, connector_id: tc }),
      api('DELETE', `${connectors}/${tc}`),
    ]);
    t.ok((bound.status === 201 && deleted.status === 409) || (bound.status === 400 && deleted.status === 204), `create round ${i}: ${bound.status} and ${deleted.status}`);
    if (bound.status === 400) isFieldError(t, bound.body, 'connector_id');
  }
  for (let i = 0; i < 20; i++) {
    const tc = (await api('POST', connectors, trunk)).body.id;
    const [moved, deleted] = await Promise.all([api('PATCH', `${numbers}/${moving}`, { connector_id: tc }), api('DELETE', `${connectors}/${tc}`)]);
    t.ok((moved.status === 200 && deleted.status === 409) || (moved.status === 400 && deleted.status === 204), `move round ${i}: ${moved.status} and ${deleted.status}`);
    // Back to the trunk that stays, so the next round moves it again (a 400 left it there already).
    if (moved.status === 200) t.equal((await api('PATCH', `${numbers}/${moving}`, { connector_id: stays })).status, 200);
    else t.equal((await api('GET', `${numbers}/${moving}`)).body.connector_id, stays, 'a refused move leaves the number where it was');
  }
  const listed = (await api('GET', numbers)).body.phoneNumbers;
  t.ok(listed.length >= 1);
  for (const n of listed) t.equal((await api('GET', `${connectors}/${n.connector_id}`)).status, 200, `${n.number} is bound to a connector that exists`);
  const shown = await api('GET', connectors);
  t.notOk(shown.text.includes('deleting_at'), 'the delete mark is never shown');
});

t.test('connectors and numbers change in place (PATCH): given fields replace, null clears, bad values are 400, others 403/404', async (t) => {
  const agent = await newAgent();
  const base = `/v1/agents/${agent}/telephony/connectors`;
  const tc = (await api('POST', base, trunk)).body;
  const changed = await api('PATCH', `${base}/${tc.id}`, { host: '10.1.2.3', port: 5080, transport: 'udp', transfer: 'bridge', max_concurrent_calls: 4, password: 'n3w-secret' });
  t.equal(changed.status, 200, changed.text);
  t.match(changed.body, { id: tc.id, name: 'Carrier', host: '10.1.2.3', port: 5080, transport: 'udp', username: 'acme', has_password: true, max_concurrent_calls: 4, transfer: 'bridge', created_at: tc.created_at });
  t.notOk(changed.text.includes('n3w-secret'), 'the new password is not shown');
  t.same((await api('GET', `${base}/${tc.id}`)).body, changed.body, 'and reads so');
  const cleared = await api('PATCH', `${base}/${tc.id}`, { username: null, password: null, max_concurrent_calls: null });
  t.match(cleared.body, { username: null, has_password: false, max_concurrent_calls: null, host: '10.1.2.3' });
  t.same((await api('PATCH', `${base}/${tc.id}`, {})).body, cleared.body, 'an empty change changes nothing');
  for (const bad of [{ transport: 'sctp' }, { port: 0 }, { host: 'sip://x' }, { name: '' }, { name: null }, { transfer: null }, { extra: 1 }, { username: 'u\r\nX: y' }]) {
    const r = await api('PATCH', `${base}/${tc.id}`, bad);
    t.equal(r.status, 400, JSON.stringify(bad));
    isFieldError(t, r.body);
  }
  t.same((await api('GET', `${base}/${tc.id}`)).body, cleared.body, 'refused changes left it as it was');
  t.equal((await api('PATCH', `${base}/tc_nope`, { name: 'x' })).status, 404);
  t.equal((await other('PATCH', `${base}/${tc.id}`, { name: 'x' })).status, 403, 'another account’s key');

  const variant = (await api('POST', `/v1/agents/${agent}/branches/main/variants`, { name: 'Paris' })).body.id;
  const tc2 = (await api('POST', base, { ...trunk, name: 'Backup' })).body.id;
  const numbers = `/v1/agents/${agent}/telephony/phone-numbers`;
  const pn = (await api('POST', numbers, { number: '+14155550199', connector_id: tc.id })).body;
  const moved = await api('PATCH', `${numbers}/${pn.id}`, { connector_id: tc2, variant_id: variant });
  t.equal(moved.status, 200, moved.text);
  t.match(moved.body, { id: pn.id, number: '+14155550199', connector_id: tc2, variant_id: variant });
  t.equal((await api('PATCH', `${numbers}/${pn.id}`, { variant_id: null })).body.variant_id, null, 'null: no variant');
  const foreign = (await api('POST', `/v1/agents/${await newAgent('Other')}/telephony/connectors`, trunk)).body.id;
  for (const [bad, field] of [[{ connector_id: foreign }, 'connector_id'], [{ variant_id: 'no-such-variant' }, 'variant_id'], [{ number: '+14155550100' }, undefined]] as const) {
    const r = await api('PATCH', `${numbers}/${pn.id}`, bad);
    t.equal(r.status, 400, JSON.stringify(bad));
    isFieldError(t, r.body, field);
  }
  t.equal((await api('GET', `${numbers}/${pn.id}`)).body.connector_id, tc2, 'refused changes left the binding');
  t.equal((await api('DELETE', `${base}/${tc.id}`)).status, 204, 'the trunk it left is free to delete');
});

t.test('phone numbers: anything but a valid E.164 number is 400 (fast-check)', async (t) => {
  const agent = await newAgent();
  const tc = (await api('POST', `/v1/agents/${agent}/telephony/connectors`, trunk)).body.id;
  const base = `/v1/agents/${agent}/telephony/phone-numbers`;
  for (const bad of ['14155550123', '+1415', '+999123456789', '(415) 555-0123', '+1 415 555 0123', 'phone', '+44 20 7946 0018x']) {
    const r = await api('POST', base, { number: bad, connector_id: tc });
    t.equal(r.status, 400, bad);
    isFieldError(t, r.body, 'number');
  }
  // Numbers that parse though no carrier assigns them (fictional 555 lines, Ofcom's drama range) are numbers.
  for (const fictional of ['+15551234567', '+447700900123']) t.equal((await api('POST', base, { number: fictional, connector_id: tc })).status, 201, fictional);
  await fc.assert(
    fc.asyncProperty(fc.string({ maxLength: 40 }), async (s) => {
      const r = await api('POST', base, { number: s, connector_id: tc });
      // Whatever comes, never a 5xx; only strict E.164 strings may bind.
      if (r.status === 201) return /^\+[1-9]\d{6,14}$/.test(s);
      return r.status === 400 || r.status === 409;
    }),
    { numRuns: 150 },
  );
});

t.test('admin: outbound connectors name a telephony connector and a from number; other kinds may not', async (t) => {
  const a = admin(p);
  const agent = await newAgent();
  const tc = (await api('POST', `/v1/agents/${agent}/telephony/connectors`, trunk)).body.id;
  const ok = await a('POST', '/connectors', { account_id: accountId, project_id: agent, kind: 'outbound', telephony_connector_id: tc, from_number: '+14155550100' });
  t.equal(ok.status, 201);
  t.match(ok.body, { kind: 'outbound', telephony_connector_id: tc, from_number: '+14155550100' });
  const chat = await a('POST', '/connectors', { account_id: accountId, project_id: agent, kind: 'chat' });
  t.equal(chat.status, 201);
  t.same(Object.keys(chat.body).sort(), ['account_id', 'environment', 'host', 'id', 'kind', 'project_id', 'token', 'variant_id'], 'other kinds answer exactly as operator.md says');
  const wrongKind = await a('POST', '/connectors', { account_id: accountId, project_id: agent, kind: 'chat', from_number: '+14155550100' });
  t.equal(wrongKind.status, 400);
  isFieldError(t, wrongKind.body, 'from_number');
  const badNumber = await a('POST', '/connectors', { account_id: accountId, project_id: agent, kind: 'outbound', telephony_connector_id: tc, from_number: '555' });
  t.equal(badNumber.status, 400);
  isFieldError(t, badNumber.body, 'from_number');
  const agent2 = await newAgent('Elsewhere');
  const foreign = await a('POST', '/connectors', { account_id: accountId, project_id: agent2, kind: 'outbound', telephony_connector_id: tc, from_number: '+14155550100' });
  t.equal(foreign.status, 404, 'a telephony connector of another project');
  isFieldError(t, foreign.body, 'telephony_connector_id');
  const listed = (await a('GET', `/connectors?account_id=${accountId}`)).body.data.find((c: any) => c.id === ok.body.id);
  t.match(listed, { telephony_connector_id: tc, from_number: '+14155550100' });
});

t.test('CLI: connectors create --kind outbound --telephony-connector ID --from-number N', async (t) => {
  const agent = await newAgent('Dialer');
  const tc = (await api('POST', `/v1/agents/${agent}/telephony/connectors`, trunk)).body.id;
  const { stdout } = await promisify(execFile)(process.execPath, [
    CLI, '--url', p.edge, '--token', p.operatorToken,
    'connectors', 'create', '--account', accountId, '--project', agent, '--kind', 'outbound', '--telephony-connector', tc, '--from-number', '+14155550100',
  ]);
  const out = JSON.parse(stdout);
  t.match(out, { kind: 'outbound', telephony_connector_id: tc, from_number: '+14155550100' });
  t.match(out.token, /^sbc_/);
  const help = await promisify(execFile)(process.execPath, [CLI, 'help']);
  t.match(help.stdout, /--telephony-connector TC_ID --from-number E164/);
});
