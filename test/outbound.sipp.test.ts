/**
 * Outbound calls end to end with the real media gateway and Debian's sipp on 127.0.0.2 as the far end, for
 * what the call actor adds around the dial (`voice.outbound.test.ts` covers the dial outcomes themselves:
 * answered with the header and the start function, busy, rejected, unanswered): an answered call is counted
 * by Concurrent Calls and found by its number while it is up, keeps `success` after the far end hangs up and
 * answers 404 once the status retention has passed; and a trunk's own concurrency limit
 * (`max_concurrent_calls`) holds a second call `queued` until its queueing timeout fails it while the first
 * rings on. Needs sipp and espeak-ng: skipped locally without them, failed with CI=true.
 */
import t, { type Test } from 'tap';
import { createSocket, type Socket } from 'node:dgram';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import alawmulaw from 'alawmulaw';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsKey } from './helpers/conversations.js';
import { http } from './helpers/http.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';
import { runSipp, scenario, quietPort } from './helpers/voice.js';
import { toolAvailable } from './helpers/tools.js';

const needsSipp = toolAvailable('/usr/bin/sipp', 'sip-tester') && toolAvailable('/usr/bin/espeak-ng', 'espeak-ng') ? {} : { skip: 'sipp or espeak-ng is not installed' };

const RING_MS = 3000;
const QUEUE_MS = 800;
const RETENTION_MS = 2000;
let p: Platform;
let c: ChatProject;
const dir = mkdtempSync(join(tmpdir(), 'sb-outbound-sipp-'));

t.before(async () => {
  if ('skip' in needsSipp) return;
  p = await startPlatform({
    env: { OUTBOUND_RING_TIMEOUT_MS: String(RING_MS), OUTBOUND_QUEUE_TIMEOUT_MS: String(QUEUE_MS), OUTBOUND_STATUS_RETENTION_MS: String(RETENTION_MS) },
  });
  c = await chatProject(p, { name: 'Outbound Co', behavior: 'Hello, this is Acme Dental calling about your appointment.' });
});
t.teardown(async () => {
  await p?.stop();
  if (p) removeDir(p.dataDir);
  removeDir(dir);
});

/** A trunk to sipp on `port` and an outbound connector through it; answers the connector's token. */
async function outboundTo(port: number, extra: Record<string, unknown> = {}): Promise<string> {
  const tc = await c.api('POST', `/v1/agents/${c.agentId}/telephony/connectors`, { name: 'sipp', host: '127.0.0.2', port, transport: 'udp', ...extra });
  if (tc.status !== 201) throw new Error(tc.text);
  const con = await admin(p)('POST', '/connectors', { account_id: c.accountId, project_id: c.agentId, kind: 'outbound', telephony_connector_id: tc.body.id, from_number: '+14155550100' });
  if (con.status !== 201) throw new Error(con.text);
  return con.body.token;
}

const trigger = (token: string, body: Record<string, unknown>) =>
  http(p.edge, 'POST', '/v1/outbound-calling', { body: { encryption: 'UDP/RTP', ...body }, headers: { 'x-service-auth-token': token } });
const status = (token: string, sid: string) => http(p.edge, 'GET', `/v1/outbound-calling/${sid}/status`, { headers: { 'x-service-auth-token': token } });

/** Polls the status until `done` holds; answers every distinct status seen, in order, and the last answer. */
async function until(token: string, sid: string, done: (r: { status: number; body: any }) => boolean) {
  const seen: string[] = [];
  for (;;) {
    const r = await status(token, sid);
    const label = r.status === 200 ? r.body.status : String(r.status);
    if (seen[seen.length - 1] !== label) seen.push(label);
    if (done(r)) return { seen, last: r };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** sipp's exit code is 0: every message of its scenario came as written (its output is shown otherwise). */
async function sippDone(t: Test, run: Promise<{ code: number | null; out: string }>, message = 'sipp ran its scenario through'): Promise<void> {
  const { code, out } = await run;
  t.equal(code, 0, message);
  if (code !== 0) t.comment(out.slice(-3000));
}

/** A UDP socket on 127.0.0.2 counting the RTP packets that reach it (A-law, as the scenario answers), and those with sound. */
async function audioSink(): Promise<{ socket: Socket; port: number; packets: () => number; voiced: () => number }> {
  const socket = createSocket('udp4');
  let packets = 0;
  let voiced = 0;
  socket.on('message', (m) => {
    if (m.length <= 12 || m[0] >> 6 !== 2) return;
    packets++;
    const pcm = alawmulaw.alaw.decode(m.subarray(12));
    let sum = 0;
    for (const s of pcm) sum += s * s;
    if (Math.sqrt(sum / pcm.length) > 300) voiced++;
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.2', resolve));
  return { socket, port: socket.address().port, packets: () => packets, voiced: () => voiced };
}

t.test('answered: queued/calling then success, counted by Concurrent Calls and found by number, success after the hang-up, 404 after retention', needsSipp, async (t) => {
  const port = await quietPort();
  const token = await outboundTo(port);
  const audio = await audioSink();
  t.teardown(() => audio.socket.close());
  const sipp = runSipp({
    scenario: scenario('outbound-answer.xml', dir, { HEADER: 'X-Order-Ref', VALUE: 'A-1234', AUDIO_IP: '127.0.0.2', AUDIO_PORT: audio.port, RING_MS: 200, HOLD_MS: 4000 }),
    port,
    mediaPort: await quietPort(),
    dir,
    timeoutS: 30,
  });
  const placed = await trigger(token, { to_number: '+14155550123', metadata: { 'X-Order-Ref': 'A-1234' } });
  t.equal(placed.status, 200, placed.text);
  const sid = placed.body.call_sid;
  const answered = await until(token, sid, (r) => r.body?.status === 'success' || r.body?.status === 'failure');
  t.same(answered.last.body, { status: 'success', reason: '' });
  t.same(answered.seen.filter((s) => s !== 'queued'), ['calling', 'success'], `statuses ${answered.seen.join(' → ')}`);

  // While the call is up, Concurrent Calls count it, and find it by the number called.
  const key = await conversationsKey(p, c, []);
  const now = Date.now();
  const range = `start_time=${new Date(now - 300_000).toISOString()}&end_time=${new Date(now + 300_000).toISOString()}`;
  const peak = async (filter: string, until: (max: number) => boolean) => {
    for (;;) {
      const r = await http(p.edge, 'GET', `/v1/${c.accountId}/${c.agentId}/conversations/concurrency?${range}${filter}`, { headers: { 'x-api-key': key } });
      const max = r.status === 200 ? Math.max(...r.body.intervals.map((i: any) => i.max_concurrent_conversations)) : -r.status;
      if (until(max)) return max;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  t.equal(await peak('', (m) => m !== 0), 1, 'the voice call counts');
  t.equal(await peak('&phone_number=%2B14155550123', (m) => m !== 0), 1, 'found by the callee number');
  t.equal(await peak('&phone_number=+1 415-555-0123', (m) => m !== 0), 1, 'written with a raw +, spaces and dashes');
  t.equal(await peak('&phone_number=%2B19998887777', () => true), 0, 'not by another number');

  await sippDone(t, sipp, 'sipp saw the metadata header, the ACK, and its BYE answered');
  t.ok(audio.voiced() > 0, `the agent's speech reached the far end (${audio.packets()} RTP packets, ${audio.voiced()} voiced)`);
  // Hung up by the far end: the status stays success until the retention has passed, then 404.
  const ended = await until(token, sid, (r) => r.status === 404);
  t.same(ended.seen, ['success', '404']);
  t.equal(ended.last.body.error_message, 'call sid unknown, or its status is no longer kept');
});

t.test('queue limit: a trunk of one line; a second call waits queued and fails with a queue timeout', needsSipp, async (t) => {
  const port = await quietPort();
  const token = await outboundTo(port, { max_concurrent_calls: 1 });
  const sipp = runSipp({ scenario: scenario('outbound-no-answer.xml', dir), port, mediaPort: await quietPort(), dir, timeoutS: 60 });
  const first = await trigger(token, { to_number: '+14155550123' });
  await until(token, first.body.call_sid, (r) => r.body?.status === 'calling');
  const second = await trigger(token, { to_number: '+14155550124' });
  const queued = await until(token, second.body.call_sid, (r) => r.body?.status === 'failure' || r.body?.status === 'calling');
  t.same(queued.seen, ['queued', 'failure'], 'never dialled: the only line was taken');
  t.match(queued.last.body.reason, /^queue timeout/);
  const firstDone = await until(token, first.body.call_sid, (r) => r.body?.status === 'failure' || r.body?.status === 'success');
  t.match(firstDone.last.body.reason, /^no answer/, 'the first call rang on, unaffected, until the ring timeout');
  await sippDone(t, sipp, 'sipp saw one call only, and its CANCEL');
});
