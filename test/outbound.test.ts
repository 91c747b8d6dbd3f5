/**
 * Outbound calling through HTTP against a started platform (contract 4.5, 2.7, 3.3, 7.3): the
 * `X-Service-Auth-Token` of an outbound connector, every error row in `{error_message}`, the body's rules
 * (fast-check), the per-trunk queue limit with its queueing timeout, terminal statuses and the 404 after the
 * status retention. The calls here go to a trunk that never answers; answered, busy, rejected and unanswered
 * calls and the queue limit against sipp are in `outbound.sipp.test.ts`.
 */
import t from 'tap';
import { createSocket, type Socket } from 'node:dgram';
import fc from 'fast-check';
import { client, http } from './helpers/http.js';
import { natsAvailable, startNats } from './helpers/nats.js';
import { platformFor, removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';
import type { Store } from '../store/mod.js';
import { chatProject } from './helpers/chat.js';
import { admin, tenant } from './helpers/tenants.js';

const RETENTION_MS = 1500;
/** The media gateway's SIP and RTP ports: any free ones, no TLS listener (tests run side by side). */
const MEDIA_PORTS = { SIP_PORT: '0', SIP_TLS_PORT: 'off', RTP_PORT_MIN: '0', RTP_PORT_MAX: '0' };
let p: Platform;
let store: Store;
let api: ReturnType<typeof client>;
let accountId: string;
let agent: string;
let tc: string;
let token: string;

/**
 * A trunk that swallows every packet (a UDP socket of the test that never answers): a call through it stays
 * `calling` until the ring timeout, then fails, whether a media gateway sends it INVITEs or none is there.
 */
let blackhole: Socket;
let deadTrunk: { name: string; host: string; port: number; transport: string };

async function outboundConnector(p: Platform, accountId: string, projectId: string, fields: Record<string, unknown>) {
  const r = await admin(p)('POST', '/connectors', { account_id: accountId, project_id: projectId, kind: 'outbound', ...fields });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.token as string;
}

const received: Buffer[] = [];

t.before(async () => {
  blackhole = createSocket('udp4');
  blackhole.on('message', (m) => received.push(m));
  await new Promise<void>((resolve) => blackhole.bind(0, '127.0.0.2', resolve));
  deadTrunk = { name: 'Nowhere', host: '127.0.0.2', port: blackhole.address().port, transport: 'udp' };
  // The store is opened before the platform starts (`startPlatformWithStore`), not while it commits.
  ({ p, store } = await startPlatformWithStore({
    env: {
      OUTBOUND_TRUNK_CONCURRENCY: '1',
      OUTBOUND_QUEUE_TIMEOUT_MS: '500',
      OUTBOUND_RING_TIMEOUT_MS: '4000',
      OUTBOUND_STATUS_RETENTION_MS: String(RETENTION_MS),
      ...MEDIA_PORTS,
    },
  }));
  // Deployed to live: a media gateway places calls only for an agent that has something to run.
  const c = await chatProject(p, { name: 'Caller' });
  accountId = c.accountId;
  api = c.api;
  agent = c.agentId;
  tc = (await api('POST', `/v1/agents/${agent}/telephony/connectors`, deadTrunk)).body.id;
  token = await outboundConnector(p, accountId, agent, { telephony_connector_id: tc, from_number: '+14155550100' });
});
t.teardown(async () => {
  blackhole.close();
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

const trigger = (body: unknown, tok: string | null = token, on: Platform = p) =>
  http(on.edge, 'POST', '/v1/outbound-calling', { body, headers: tok === null ? {} : { 'x-service-auth-token': tok } });
const status = (sid: string, tok: string | null = token, on: Platform = p) =>
  http(on.edge, 'GET', `/v1/outbound-calling/${encodeURIComponent(sid)}/status`, { headers: tok === null ? {} : { 'x-service-auth-token': tok } });

/** Polls the status (every 100 ms, as a client polls every few seconds) until `done` holds. */
async function until(sid: string, done: (s: { status: number; body: any }) => boolean): Promise<Array<{ status: number; body: any }>> {
  const seen: Array<{ status: number; body: any }> = [];
  for (;;) {
    const r = await status(sid);
    seen.push({ status: r.status, body: r.body });
    if (done(r)) return seen;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const errorShaped = (t: any, r: { status: number; body: any }, status: number, message?: RegExp) => {
  t.equal(r.status, status);
  t.same(Object.keys(r.body ?? {}), ['error_message'], 'the family’s {error_message} shape');
  if (message) t.match(r.body.error_message, message);
};

t.test('trigger: a call_sid OUT-… at once, the status is queued or calling, and a failure keeps its reason', async (t) => {
  // UDP: the INVITEs go to the silent trunk (TLS, the default, would fail at once: nothing accepts there).
  const r = await trigger({ to_number: '+14155550123', metadata: { 'X-Ref': 'abc', 'X-Name': 'José 日本' }, encryption: 'UDP/RTP' });
  t.equal(r.status, 200, r.text);
  t.match(r.body.call_sid, /^OUT-[A-Za-z0-9]{24}$/);
  // Metadata reaches the trunk as SIP headers, their values in UTF-8 (RFC 3261, 7.3.1).
  const invite = async () => {
    for (;;) {
      const m = received.find((b) => b.includes(`X-Ref: abc`));
      if (m) return m;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  t.ok((await invite()).includes(Buffer.from('X-Name: José 日本', 'utf8')), 'the INVITE carries the header in UTF-8');
  const first = await status(r.body.call_sid);
  t.equal(first.status, 200);
  t.ok(['queued', 'calling'].includes(first.body.status), `first status ${first.body.status}`);
  t.equal(first.body.reason, '');
  const seen = await until(r.body.call_sid, (s) => s.body?.status === 'failure');
  const statuses = [...new Set(seen.map((s) => s.body.status))];
  t.same(statuses.filter((s) => s !== 'queued'), ['calling', 'failure'], 'queued/calling, then failure: nothing answers on this trunk');
  const last = seen[seen.length - 1].body;
  t.not(last.reason, '', 'a failure has a reason');
  // The call's steps are journaled with the contract's events (journal contract), in order.
  store.refresh();
  const events = (await store.journal.ofActor(`call/${r.body.call_sid}`)).flatMap((e) => e.events);
  t.same(events.map((e) => e.type), ['call.queued', 'call.calling', 'call.failed']);
  for (const e of events) t.match(e.data, { account_id: accountId, project_id: agent, call_sid: r.body.call_sid });
  // Terminal: it stays failure with the same reason until the retention ends, then 404.
  const after = await until(r.body.call_sid, (s) => s.status === 404);
  for (const s of after.slice(0, -1)) t.same(s.body, last, 'terminal status never changes');
  errorShaped(t, after[after.length - 1], 404, /call sid unknown/);
});

t.test('queue: one call at a time on the trunk; the second fails with a queue timeout', async (t) => {
  const a = await trigger({ to_number: '+14155550123', encryption: 'UDP/RTP' });
  await until(a.body.call_sid, (s) => s.body?.status === 'calling');
  const b = await trigger({ to_number: '+14155550124' });
  t.equal(b.status, 200);
  const seen = await until(b.body.call_sid, (s) => s.body?.status === 'failure');
  t.same([...new Set(seen.map((s) => s.body.status))], ['queued', 'failure'], 'never calling: the trunk was full');
  t.match(seen[seen.length - 1].body.reason, /queue timeout/);
  // The first call frees its slot when it ends; a third call then gets to calling.
  await until(a.body.call_sid, (s) => s.body?.status === 'failure');
  const c = await trigger({ to_number: '+14155550125', encryption: 'UDP/RTP' });
  const third = await until(c.body.call_sid, (s) => s.body?.status === 'calling' || s.body?.status === 'failure');
  t.equal(third[third.length - 1].body.status, 'calling', 'a freed slot is taken');
  await until(c.body.call_sid, (s) => s.body?.status === 'failure');
});

t.test("a trunk on the gateway's own SIP address fails at once, saying why", async (t) => {
  const own = (await api('POST', `/v1/agents/${agent}/telephony/connectors`, { name: 'Same host', host: '127.0.0.1', port: 5080, transport: 'udp' })).body.id;
  const ownToken = await outboundConnector(p, accountId, agent, { telephony_connector_id: own, from_number: '+14155550100' });
  const r = await trigger({ to_number: '+14155550126', encryption: 'UDP/RTP' }, ownToken);
  t.equal(r.status, 200);
  for (;;) {
    const s = await status(r.body.call_sid, ownToken);
    if (s.body?.status === 'failure') {
      t.match(s.body.reason, /own SIP address/);
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
});

/** The failure reason of a call placed through a trunk at `host` (and `port`). */
async function failureThrough(host: string, number: string, port = 5080): Promise<string> {
  const made = await api('POST', `/v1/agents/${agent}/telephony/connectors`, { name: `Trunk ${host}`, host, port, transport: 'udp' });
  if (made.status !== 201) throw new Error(`connector: ${made.status} ${made.text}`);
  const trunk = made.body.id;
  const token = await outboundConnector(p, accountId, agent, { telephony_connector_id: trunk, from_number: '+14155550100' });
  const r = await trigger({ to_number: number, encryption: 'UDP/RTP' }, token);
  for (;;) {
    const s = await status(r.body.call_sid, token);
    if (s.body?.status === 'failure') return s.body.reason;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

t.test("a trunk named by a host name that resolves to the gateway's own address fails the same way", async (t) => {
  t.match(await failureThrough('localhost', '+14155550127'), /own SIP address/);
});

t.test("a trunk at 0.0.0.0 and the gateway's SIP port is the gateway too", async (t) => {
  // As a destination the unspecified address is this machine: the INVITE would reach the gateway itself.
  const sipPort = Number(/media sip:[^:\s]+:(\d+)/.exec(p.stdout())![1]);
  t.match(await failureThrough('0.0.0.0', '+14155550129', sipPort), /own SIP address/);
});

t.test("with HOST=0.0.0.0, a trunk at a loopback address and the gateway's SIP port is the gateway; at another port it is dialled", async (t) => {
  // Listening on every interface, the gateway is reached by any of this machine's addresses at its port.
  const q = await platformFor(t, { env: { ...MEDIA_PORTS, HOST: '0.0.0.0', OUTBOUND_RING_TIMEOUT_MS: '2000' } });
  const sipPort = Number(/media sip:[^:\s]+:(\d+)/.exec(q.stdout())![1]);
  const c = await chatProject(q, { name: 'Everywhere' });
  const reason = async (host: string, port: number, number: string) => {
    const made = await c.api('POST', `/v1/agents/${c.agentId}/telephony/connectors`, { name: `Trunk ${host}:${port}`, host, port, transport: 'udp' });
    t.equal(made.status, 201, made.text);
    const tok = await outboundConnector(q, c.accountId, c.agentId, { telephony_connector_id: made.body.id, from_number: '+14155550100' });
    const r = await trigger({ to_number: number, encryption: 'UDP/RTP' }, tok, q);
    t.equal(r.status, 200, r.text);
    for (;;) {
      const s = await status(r.body.call_sid, tok, q);
      if (s.body?.status === 'failure') return s.body.reason as string;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  t.match(await reason('127.0.0.1', sipPort, '+14155550130'), /own SIP address/, '127.0.0.1');
  t.match(await reason('127.0.0.5', sipPort, '+14155550131'), /own SIP address/, 'another loopback address');
  t.match(await reason('localhost', sipPort, '+14155550132'), /own SIP address/, 'a name of one');
  // A PBX on this machine at another port is what HOST=0.0.0.0 is for: it is dialled (here nothing answers).
  t.equal(await reason('127.0.0.2', deadTrunk.port, '+14155550133'), 'unreachable', 'another port is dialled');
});

t.test('a trunk whose host does not resolve is unreachable, with no SIP status: none ever came', async (t) => {
  t.equal(await failureThrough('no-such-host.invalid', '+14155550128'), 'unreachable');
});

t.test('auth: missing, unknown, wrong kind, or an outbound connector without trunk and number is 401', async (t) => {
  errorShaped(t, await trigger({ to_number: '+14155550123' }, null), 401, /missing X-Service-Auth-Token/);
  errorShaped(t, await trigger({ to_number: '+14155550123' }, 'sbc_con_AAAAAAAAAAAAAAAA_' + 'x'.repeat(32)), 401, /invalid/);
  errorShaped(t, await trigger({ to_number: '+14155550123' }, 'nonsense'), 401, /invalid/);
  const chat = await admin(p)('POST', '/connectors', { account_id: accountId, project_id: agent, kind: 'chat' });
  errorShaped(t, await trigger({ to_number: '+14155550123' }, chat.body.token), 401, /not configured for outbound/);
  const bare = await outboundConnector(p, accountId, agent, {});
  errorShaped(t, await trigger({ to_number: '+14155550123' }, bare), 401, /not configured for outbound/);
  // A deleted connector's token stops working at once.
  const doomed = await admin(p)('POST', '/connectors', { account_id: accountId, project_id: agent, kind: 'outbound', telephony_connector_id: tc, from_number: '+14155550100' });
  t.equal((await admin(p)('DELETE', `/connectors/${doomed.body.id}`)).status, 204);
  errorShaped(t, await trigger({ to_number: '+14155550123' }, doomed.body.token), 401);
  // Status: the same token rules.
  const placed = await trigger({ to_number: '+14155550123' });
  errorShaped(t, await status(placed.body.call_sid, null), 401);
  errorShaped(t, await status(placed.body.call_sid, 'nonsense'), 401);
  errorShaped(t, await status(placed.body.call_sid, chat.body.token), 401);
  await until(placed.body.call_sid, (s) => s.status === 404);
});

t.test('status: a malformed call sid is 400, an unknown one 404, another project’s call 404', async (t) => {
  for (const bad of ['abc', 'OUT-', 'out-123', 'OUT-a b', 'OUT-' + 'x'.repeat(93), 'CA123']) errorShaped(t, await status(bad), 400, /invalid call sid format/);
  errorShaped(t, await status('OUT-unknown123'), 404);
  const other = (await api('POST', '/v1/agents', { name: 'Other' })).body.agentId;
  const otherTc = (await api('POST', `/v1/agents/${other}/telephony/connectors`, deadTrunk)).body.id;
  const otherToken = await outboundConnector(p, accountId, other, { telephony_connector_id: otherTc, from_number: '+14155550101' });
  const mine = await trigger({ to_number: '+14155550123' });
  errorShaped(t, await status(mine.body.call_sid, otherToken), 404, /call sid unknown/);
  await until(mine.body.call_sid, (s) => s.status === 404);
});

t.test('trigger: every 400 row of 7.3', async (t) => {
  const rows: Array<[unknown, RegExp]> = [
    [[], /JSON object/],
    [{}, /to_number is required/],
    [{ to_number: 14155550123 }, /to_number is required/],
    [{ to_number: 'not a number' }, /to_number must be/],
    [{ to_number: '4155550123' }, /to_number must be/],
    [{ to_number: '+1415' }, /to_number must be/],
    [{ to_number: '020 7946 0018', country_code: 'XX' }, /country_code/],
    [{ to_number: '020 7946 0018', country_code: 7 }, /country_code/],
    [{ to_number: '+14155550123', metadata: 'x' }, /metadata must be an object/],
    [{ to_number: '+14155550123', metadata: ['a'] }, /metadata must be an object/],
    [{ to_number: '+14155550123', metadata: { a: { nested: 'x' } } }, /metadata value of "a" must be a string/],
    [{ to_number: '+14155550123', metadata: { a: 1 } }, /must be a string/],
    [{ to_number: '+14155550123', metadata: { a: true } }, /must be a string/],
    [{ to_number: '+14155550123', metadata: { a: null } }, /must be a string/],
    [{ to_number: '+14155550123', metadata: { 'bad key': 'x' } }, /not a valid SIP header name/],
    [{ to_number: '+14155550123', metadata: { Via: 'x' } }, /metadata key "Via" names a SIP header the platform sets itself/],
    [{ to_number: '+14155550123', metadata: { 'content-length': '0' } }, /names a SIP header the platform sets itself/],
    [{ to_number: '+14155550123', metadata: { i: 'x' } }, /names a SIP header the platform sets itself/],
    [{ to_number: '+14155550123', metadata: { 'X-Cust': '1', 'x-cust': '2' } }, /metadata key "x-cust" repeats another key but for case/],
    [{ to_number: '+14155550123', metadata: { 'X-A': 'line\r\nInjected: yes' } }, /line breaks/],
    [{ to_number: '+14155550123', metadata: { 'X-Big': 'a'.repeat(20_000) } }, /under 26624 bytes/],
    [{ to_number: '+14155550123', encryption: 'TCP/RTP' }, /encryption must be one of TLS\/SRTP, TLS\/RTP, UDP\/SRTP, UDP\/RTP/],
    [{ to_number: '+14155550123', encryption: 'tls/srtp' }, /encryption must be one of/],
  ];
  for (const [body, message] of rows) errorShaped(t, await trigger(body), 400, message);
  const malformed = await http(p.edge, 'POST', '/v1/outbound-calling', { raw: '{"to_number":', headers: { 'x-service-auth-token': token, 'content-type': 'application/json' } });
  t.equal(malformed.status, 400, 'unparseable JSON');
  t.type(malformed.body.error_message, 'string');
});

t.test('trigger: national numbers with country_code, each encryption, metadata just under the limit', async (t) => {
  const sids: string[] = [];
  for (const body of [
    { to_number: '020 7946 0018', country_code: 'GB' },
    { to_number: '(415) 555-0123', country_code: 'us' },
    // Numbers that parse though no carrier assigns them: fictional 555 lines, Ofcom's drama range.
    { to_number: '+15551234567' },
    { to_number: '5551234567', country_code: 'US' },
    { to_number: '+447700900123' },
    ...['TLS/SRTP', 'TLS/RTP', 'UDP/SRTP', 'UDP/RTP'].map((encryption) => ({ to_number: '+14155550123', encryption })),
    // JSON {"X-Big":"…"} is 12 + n bytes; base64 of 19_956 bytes is 26_608 < 26_624.
    { to_number: '+14155550123', metadata: { 'X-Big': 'a'.repeat(19_944) } },
  ]) {
    const r = await trigger(body);
    t.equal(r.status, 200, `${JSON.stringify(body).slice(0, 80)}: ${r.text}`);
    sids.push(r.body.call_sid);
  }
  for (const sid of sids) await until(sid, (s) => s.status === 404);
});

t.test('trigger: whatever the body, a 200 with a call_sid or a 400 {error_message}, never a 5xx (fast-check)', async (t) => {
  const value = fc.oneof(fc.string({ maxLength: 30 }), fc.integer(), fc.boolean(), fc.constant(null), fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 2 }));
  const body = fc.oneof(
    fc.record({
      to_number: fc.oneof(fc.constantFrom('+14155550123', '+442079460018', '020 7946 0018', '+1415'), fc.string({ maxLength: 20 }), fc.integer()),
      country_code: fc.option(fc.oneof(fc.constantFrom('GB', 'US', 'de', 'ZZ'), fc.string({ maxLength: 3 })), { nil: undefined }),
      metadata: fc.option(fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), value, { maxKeys: 4 }), { nil: undefined }),
      encryption: fc.option(fc.oneof(fc.constantFrom('TLS/SRTP', 'TLS/RTP', 'UDP/SRTP', 'UDP/RTP'), fc.string({ maxLength: 10 })), { nil: undefined }),
    }, { requiredKeys: [] }),
    fc.anything(),
  );
  const placed: string[] = [];
  await fc.assert(
    fc.asyncProperty(body, async (b) => {
      const r = await trigger(b);
      if (r.status === 200) {
        placed.push(r.body.call_sid);
        return /^OUT-/.test(r.body.call_sid);
      }
      return r.status === 400 && typeof r.body.error_message === 'string' && Object.keys(r.body).length === 1;
    }),
    { numRuns: 120 },
  );
  t.pass(`${placed.length} of the bodies placed calls`);
  for (const sid of placed) await until(sid, (s) => s.status === 404);
});

const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };
t.test('trigger: 500 when the call actor cannot be reached (an edge without workers)', needsNats, async (t) => {
  const nats = await startNats();
  t.teardown(() => nats.stop());
  const edgeOnly = await platformFor(t, { dataDir: undefined, roles: ['edge'], env: { NATS_URL: nats.url, ASK_TIMEOUT_MS: '300', ...MEDIA_PORTS } });
  const a = await tenant(edgeOnly, 'Solo');
  const c = client(edgeOnly.edge, { 'x-api-key': a.key });
  const ag = (await c('POST', '/v1/agents', { name: 'Solo' })).body.agentId;
  const tcId = (await c('POST', `/v1/agents/${ag}/telephony/connectors`, deadTrunk)).body.id;
  const tok = await outboundConnector(edgeOnly, a.accountId, ag, { telephony_connector_id: tcId, from_number: '+14155550100' });
  const r = await http(edgeOnly.edge, 'POST', '/v1/outbound-calling', { body: { to_number: '+14155550123' }, headers: { 'x-service-auth-token': tok } });
  errorShaped(t, r, 500, /failed to place the call; retry with exponential backoff/);
});
