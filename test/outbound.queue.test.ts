/**
 * The order a trunk's queue is served in (docs/outbound.md, "Trunk slots"), through HTTP against a started
 * platform (one process: one worker) and a far end of raw UDP SIP on 127.0.0.2 that holds each INVITE until
 * the test answers it busy. A trunk of one line (`max_concurrent_calls: 1`) carries one call; the calls placed
 * while it is busy wait `queued`, and each time the line is freed the earliest of them goes to `calling`: the
 * far end sees their INVITEs in the order they were placed, and each status reads `calling` only once every
 * call placed before it has had the line.
 */
import t from 'tap';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { http } from './helpers/http.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';
import { responseTo, udpPeer, until, type UdpPeer } from './helpers/raw-sip.js';
import { admin } from './helpers/tenants.js';

/** Long enough that no waiting call times out while those before it are served one by one. */
const QUEUE_MS = 120_000;
/** The media gateway's SIP and RTP ports: any free ones, no TLS listener (tests run side by side). */
const MEDIA_PORTS = { SIP_PORT: '0', SIP_TLS_PORT: 'off', RTP_PORT_MIN: '0', RTP_PORT_MAX: '0' };
let p: Platform;
let c: ChatProject;

t.before(async () => {
  p = await startPlatform({ env: { OUTBOUND_QUEUE_TIMEOUT_MS: String(QUEUE_MS), ...MEDIA_PORTS } });
  // Deployed to live: a media gateway places calls only for an agent that has something to run.
  c = await chatProject(p, { name: 'Queue Co' });
});
t.teardown(async () => {
  await p?.stop();
  if (p) removeDir(p.dataDir);
});

/** A trunk of one line to `far` and an outbound connector through it; answers the connector's token. */
async function oneLineTrunkTo(far: UdpPeer): Promise<string> {
  const tc = await c.api('POST', `/v1/agents/${c.agentId}/telephony/connectors`, { name: 'One line', host: far.address, port: far.port, transport: 'udp', max_concurrent_calls: 1 });
  if (tc.status !== 201) throw new Error(tc.text);
  const con = await admin(p)('POST', '/connectors', { account_id: c.accountId, project_id: c.agentId, kind: 'outbound', telephony_connector_id: tc.body.id, from_number: '+14155550100' });
  if (con.status !== 201) throw new Error(con.text);
  return con.body.token;
}

/** The INVITEs the far end got, one per call (UDP retransmissions left out), in the order they came. */
const invites = (far: UdpPeer) => {
  const seen = new Map<string, string>();
  for (const m of far.got) {
    if (!m.startsWith('INVITE ')) continue;
    const callId = /\r\nCall-ID:\s*(\S+)/i.exec(m)![1];
    if (!seen.has(callId)) seen.set(callId, m);
  }
  return [...seen.values()];
};
/** The number an INVITE calls (its Request-URI's user part). */
const calledIn = (invite: string) => /^INVITE sip:([^@;]+)@/.exec(invite)![1];

t.test('calls queued on a trunk of one line go to calling in the order they were placed', async (t) => {
  const far = await udpPeer(0);
  t.teardown(() => far.socket.close());
  const token = await oneLineTrunkTo(far);
  const headers = { 'x-service-auth-token': token };
  const place = async (number: string) => {
    const r = await http(p.edge, 'POST', '/v1/outbound-calling', { body: { to_number: number, encryption: 'UDP/RTP' }, headers });
    if (r.status !== 200) throw new Error(r.text);
    return r.body.call_sid as string;
  };
  const statusOf = async (sid: string) => (await http(p.edge, 'GET', `/v1/outbound-calling/${sid}/status`, { headers })).body;
  /** The status once it is no longer `from`: the record is written as the step commits, which may follow the INVITE. */
  const statusPast = async (sid: string, from: string) => {
    for (let s = await statusOf(sid); ; s = await statusOf(sid)) {
      if (s.status !== from) return s;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  /** Answers an INVITE (and its retransmissions) busy, back to where it came from. */
  const busy = (invite: string) => {
    const answer = responseTo(invite, '486 Busy Here', { toTag: 'busy' });
    const via = /\r\nVia:\s*SIP\/2\.0\/UDP\s+([^:;\s]+):(\d+)/i.exec(invite)!;
    far.socket.send(Buffer.from(answer, 'latin1'), Number(via[2]), via[1]);
  };

  // The first call takes the line; the far end holds its INVITE, so it stays `calling`.
  const numbers = ['+14155550170', '+14155550171', '+14155550172', '+14155550173', '+14155550174', '+14155550175', '+14155550176'];
  const sids = [await place(numbers[0])];
  const first = await until(() => invites(far)[0], 20_000);
  t.equal(calledIn(first), numbers[0]);
  // Six more, one after the other, wait for the line.
  for (const n of numbers.slice(1)) sids.push(await place(n));
  for (const sid of sids.slice(1)) t.same(await statusOf(sid), { status: 'queued', reason: '' }, 'waits for the line');
  // The line stays busy a while (several of the 250 ms polls for slots freed elsewhere): waiters that each
  // retried on their own timer would by then be out of placing order, and the line would go to whichever
  // retried next.
  await new Promise((resolve) => setTimeout(resolve, 1000));

  // Each busy answer frees the line: the next INVITE is the earliest waiting call's, and every later one still waits.
  for (let k = 1; k < numbers.length; k++) {
    busy(invites(far)[k - 1]);
    const next = await until(() => invites(far)[k], 20_000);
    t.equal(calledIn(next), numbers[k], `call ${k + 1} is the one dialled after call ${k} ended`);
    t.same(await statusPast(sids[k], 'queued'), { status: 'calling', reason: '' }, `call ${k + 1} is calling`);
    for (const later of sids.slice(k + 1)) t.equal((await statusOf(later)).status, 'queued', 'the calls placed after it still wait');
  }
  busy(invites(far)[numbers.length - 1]);
  for (const sid of sids) t.same(await statusPast(sid, 'calling'), { status: 'failure', reason: 'busy (SIP 486)' }, 'every call was dialled and answered busy');
});
