/**
 * Outbound calls placed by the media gateway against sipp as the called party (contract 4.5): answered (the
 * metadata header arrives, the conversation starts after connect, agent speech reaches the far end as RTP,
 * status queued/calling then success, the call actor hears of the hang-up), busy, rejected and unanswered.
 */
import t from 'tap';
import dgram from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import alawmulaw from 'alawmulaw';
import { http } from './helpers/http.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { admin } from './helpers/tenants.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { runSipp, scenario, voiceTools, quietPort } from './helpers/voice.js';

/** A fresh options object per test: tap writes a filtered-out test's skip onto the object it is given. */
const needsTools = () => (voiceTools() ? {} : { skip: 'sipp, espeak-ng or pocketsphinx is not installed' });

let p: Platform;
let project: ChatProject;
let dir: string;

t.before(async () => {
  if (!voiceTools()) return;
  dir = mkdtempSync(join(tmpdir(), 'sb-voice-out-'));
  p = await startPlatform({ env: { OUTBOUND_RING_TIMEOUT_MS: '2500', VOICE_NO_INPUT_MS: '60000' } });
  project = await chatProject(p, {
    name: 'Dialler',
    functions: { start: 'function start(conv) { conv.say("Hello, this is Acme calling about order " + conv.sip_headers.get("X-Order") + "."); }' },
  });
});
t.teardown(async () => {
  if (!p) return;
  await p.stop();
  removeDir(p.dataDir);
  if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
});

/** A trunk at sipp's address and an outbound connector through it; answers the connector's token. */
async function trunkTo(port: number): Promise<string> {
  const c = await project.api('POST', `/v1/agents/${project.agentId}/telephony/connectors`, { name: `sipp ${port}`, host: '127.0.0.2', port, transport: 'udp' });
  const r = await admin(p)('POST', '/connectors', { account_id: project.accountId, project_id: project.agentId, kind: 'outbound', telephony_connector_id: c.body.id, from_number: '+14155550100' });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.token;
}

const trigger = (token: string, body: unknown) => http(p.edge, 'POST', '/v1/outbound-calling', { body, headers: { 'x-service-auth-token': token } });
const status = (token: string, sid: string) => http(p.edge, 'GET', `/v1/outbound-calling/${sid}/status`, { headers: { 'x-service-auth-token': token } });

async function statusesUntil(token: string, sid: string, done: (b: any) => boolean) {
  const seen: string[] = [];
  for (let i = 0; i < 400; i++) {
    const r = await status(token, sid);
    if (seen[seen.length - 1] !== r.body.status) seen.push(r.body.status);
    if (done(r.body)) return { seen, last: r.body };
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`status never settled: ${seen.join(' → ')}`);
}

t.test('an answered call: header at sipp, conversation after connect, agent speech as RTP, success', needsTools(), async (t) => {
  const port = await quietPort();
  const token = await trunkTo(port);
  const sink = dgram.createSocket('udp4');
  await new Promise<void>((r) => sink.bind(0, '127.0.0.2', () => r()));
  t.teardown(() => sink.close());
  let packets = 0;
  let voiced = 0;
  const types = new Set<number>();
  sink.on('message', (m) => {
    packets++;
    types.add(m[1] & 0x7f);
    const pcm = alawmulaw.alaw.decode(m.subarray(12));
    let sum = 0;
    for (const s of pcm) sum += s * s;
    if (Math.sqrt(sum / pcm.length) > 300) voiced++;
  });
  const file = scenario('outbound-answer.xml', dir, { HEADER: 'X-Order', VALUE: 'A-1001', AUDIO_IP: '127.0.0.2', AUDIO_PORT: sink.address().port, RING_MS: 500, HOLD_MS: 5000 });
  const sipp = runSipp({ scenario: file, port, mediaPort: await quietPort(), dir });
  await new Promise((r) => setTimeout(r, 300));
  const r = await trigger(token, { to_number: '+14155550123', encryption: 'UDP/RTP', metadata: { 'X-Order': 'A-1001' } });
  t.equal(r.status, 200, r.text);
  const sid = r.body.call_sid;
  const { seen, last } = await statusesUntil(token, sid, (b) => b.status === 'success' || b.status === 'failure');
  t.equal(last.status, 'success', `answered (${seen.join(' → ')}, ${last.reason})`);
  t.ok(seen.every((s) => ['queued', 'calling', 'success'].includes(s)), 'through queued/calling only');
  const done = await sipp;
  t.equal(done.code, 0, 'sipp saw the header, the ACK and its BYE answered', { out: done.out.slice(-2000) });
  t.ok(packets > 50 && voiced > 20, `agent speech reached the far end as RTP (${packets} packets, ${voiced} voiced)`);
  t.same([...types], [8], 'as PCMA, the codec the far end answered with');

  const key = await conversationsKey(p, project);
  const read = conversationsClient(p, project, key);
  let conv: any = null;
  for (let i = 0; i < 100 && !conv; i++) {
    const rows = (await read({ channel: 'VOICE-SIP' })).body.conversations ?? [];
    conv = rows.find((c: any) => c.state?.call_sid === sid && c.in_progress === false) ?? null;
    if (!conv) await new Promise((res) => setTimeout(res, 100));
  }
  t.ok(conv, 'the call has a VOICE-SIP conversation, ended after the hang-up');
  t.match(conv.turns[0].agent_response, /order A-1001/, 'the start function ran with the metadata as a SIP header');
  t.equal(conv.from_number, '+14155550100');
  t.equal(conv.to_number, '+14155550123');
});

for (const [code, reason, expected] of [[486, 'Busy Here', /busy/], [603, 'Decline', /rejected/]] as const) {
  t.test(`a ${code} answer: failure, ${expected.source}`, needsTools(), async (t) => {
    const port = await quietPort();
    const token = await trunkTo(port);
    const sipp = runSipp({ scenario: scenario('outbound-reject.xml', dir, { STATUS: code, REASON: reason }), port, mediaPort: await quietPort(), dir });
    await new Promise((r) => setTimeout(r, 300));
    const r = await trigger(token, { to_number: '+14155550123', encryption: 'UDP/RTP' });
    const { last } = await statusesUntil(token, r.body.call_sid, (b) => b.status === 'failure' || b.status === 'success');
    t.equal(last.status, 'failure');
    t.match(last.reason, expected);
    t.match(last.reason, new RegExp(String(code)), 'with the SIP status');
    t.equal((await sipp).code, 0, 'sipp got its ACK');
  });
}

t.test('nobody answers within the ring timeout: CANCEL, failure with no answer', needsTools(), async (t) => {
  const port = await quietPort();
  const token = await trunkTo(port);
  const sipp = runSipp({ scenario: scenario('outbound-no-answer.xml', dir), port, mediaPort: await quietPort(), dir });
  await new Promise((r) => setTimeout(r, 300));
  const r = await trigger(token, { to_number: '+14155550123', encryption: 'UDP/RTP' });
  const { last } = await statusesUntil(token, r.body.call_sid, (b) => b.status === 'failure' || b.status === 'success');
  t.equal(last.status, 'failure');
  t.match(last.reason, /no answer/);
  t.equal((await sipp).code, 0, 'sipp saw the CANCEL');
});

/** Metadata that makes the INVITE larger than RFC 3261 18.1.1's 1,300 bytes: 24 headers of 80 characters. */
const LARGE_METADATA = { 'X-Order': 'A-1002', ...Object.fromEntries(Array.from({ length: 24 }, (_, i) => [`X-Pad-${i}`, 'p'.repeat(80)])) };

for (const [transport, how] of [['t1', 'over TCP, as RFC 3261 18.1.1 asks of a request over 1,300 bytes'], ['u1', 'over UDP after all, when the far end takes no TCP connection']] as const) {
  t.test(`a large INVITE to a UDP trunk goes ${how}`, needsTools(), async (t) => {
    const port = await quietPort();
    const token = await trunkTo(port);
    const file = scenario('outbound-answer.xml', dir, { HEADER: 'X-Pad-23', VALUE: 'p'.repeat(80), AUDIO_IP: '127.0.0.2', AUDIO_PORT: await quietPort(), RING_MS: 200, HOLD_MS: 1500 });
    const sipp = runSipp({ scenario: file, port, mediaPort: await quietPort(), transport, dir });
    await new Promise((r) => setTimeout(r, 300));
    const r = await trigger(token, { to_number: '+14155550123', encryption: 'UDP/RTP', metadata: LARGE_METADATA });
    t.equal(r.status, 200, r.text);
    const { seen, last } = await statusesUntil(token, r.body.call_sid, (b) => b.status === 'success' || b.status === 'failure');
    t.equal(last.status, 'success', `answered (${seen.join(' → ')}, ${last.reason})`);
    const done = await sipp;
    t.equal(done.code, 0, `sipp (${transport === 't1' ? 'TCP' : 'UDP'} only) got the INVITE with its last header, the ACK, and its BYE answered`, { out: done.out.slice(-2000) });
  });
}

t.test('a 200 OK retransmitted (the far end had not seen our ACK yet) gets the ACK again; the call goes on', needsTools(), async (t) => {
  const port = await quietPort();
  const token = await trunkTo(port);
  const file = scenario('outbound-answer-twice.xml', dir, { HEADER: 'X-Order', VALUE: 'A-1003', AUDIO_IP: '127.0.0.2', AUDIO_PORT: await quietPort(), RING_MS: 200, HOLD_MS: 2000 });
  const sipp = runSipp({ scenario: file, port, mediaPort: await quietPort(), dir });
  await new Promise((r) => setTimeout(r, 300));
  const r = await trigger(token, { to_number: '+14155550123', encryption: 'UDP/RTP', metadata: { 'X-Order': 'A-1003' } });
  const { last } = await statusesUntil(token, r.body.call_sid, (b) => b.status === 'success' || b.status === 'failure');
  t.equal(last.status, 'success');
  const done = await sipp;
  t.equal(done.code, 0, 'sipp got an ACK for each 200 OK, no BYE of ours, and hung up itself', { out: done.out.slice(-8000) });
});
