/**
 * A worker killed mid-call loses nothing, for outbound calls: over NATS, with the media gateway in its own
 * process, the worker owning a call's actor is SIGKILLed while the far end (sipp) is still ringing. Another
 * worker takes the shard, the call's wake-up timer activates it there, its dial request is sent again with
 * the same call_sid, and the media gateway answers it with the call it already placed: one INVITE, and the
 * status goes on to success. When the far end answers and hangs up before the call's new worker has sent the
 * dial again, the answer is lost with the killed worker and the hang-up reaches a call still `calling`: it is a
 * success all the same, with its conversation. Needs nats-server and sipp (skipped locally without them, failed
 * with CI=true).
 */
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSocket } from 'node:dgram';
import { chatProject } from './helpers/chat.js';
import { eventually } from './helpers/eventually.js';
import { startCluster } from './helpers/cluster.js';
import { http } from './helpers/http.js';
import { natsAvailable } from './helpers/nats.js';
import { startPlatform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';
import { MEDIA_ENV, runSipp, scenario, quietPort } from './helpers/voice.js';
import { toolAvailable } from './helpers/tools.js';

const ready = natsAvailable() && toolAvailable('/usr/bin/sipp', 'sip-tester') && toolAvailable('/usr/bin/espeak-ng', 'espeak-ng');
// A fresh options object for each test: tap writes into the one it is given.
const needs = () => (ready ? {} : { skip: 'nats-server, sipp or espeak-ng is not installed' });

/**
 * A cluster of two workers, a media gateway in its own process, and an agent whose outbound connector's trunk is
 * a sipp (`outbound-answer.xml`) that rings `ringMs` and then holds the line `holdMs` before it hangs up; the
 * call is placed, and the worker owning it is SIGKILLed once it is `calling`.
 */
async function killedWhileCalling(t: Test, ringMs: number, holdMs: number) {
  const dir = mkdtempSync(join(tmpdir(), 'sb-outbound-failover-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // A long ring timeout: the call must not fail by its own timers while the shard moves.
  const outboundEnv = { OUTBOUND_RING_TIMEOUT_MS: '30000', OUTBOUND_STATUS_RETENTION_MS: '600000' };
  const cluster = await startCluster({ workers: 2, leaseTtlMs: 1500, passivateAfterMs: 60_000, env: outboundEnv });
  t.teardown(() => cluster.stop());
  const media = await startPlatform({
    roles: ['media'],
    dataDir: cluster.dataDir,
    env: { ...MEDIA_ENV, ...outboundEnv, NATS_URL: cluster.natsUrl, SHARDS: String(cluster.shardCount), LEASE_TTL_MS: '1500', OPERATOR_TOKEN: cluster.edge.operatorToken, VOICE_NO_INPUT_MS: '60000' },
  });
  t.teardown(() => media.stop());

  const c = await chatProject(cluster.edge, { name: 'Failover Dialler' });
  const port = await quietPort();
  const tc = await c.api('POST', `/v1/agents/${c.agentId}/telephony/connectors`, { name: 'sipp', host: '127.0.0.2', port, transport: 'udp' });
  const con = await admin(cluster.edge)('POST', '/connectors', { account_id: c.accountId, project_id: c.agentId, kind: 'outbound', telephony_connector_id: tc.body.id, from_number: '+14155550100' });
  const token = con.body.token;
  const audio = createSocket('udp4');
  await new Promise<void>((resolve) => audio.bind(0, '127.0.0.2', resolve));
  t.teardown(() => audio.close());
  const sipp = runSipp({
    scenario: scenario('outbound-answer.xml', dir, { HEADER: 'X-Order', VALUE: 'F-1', AUDIO_IP: '127.0.0.2', AUDIO_PORT: audio.address().port, RING_MS: ringMs, HOLD_MS: holdMs }),
    port,
    mediaPort: await quietPort(),
    dir,
    timeoutS: 60,
  });
  let sippEnded = false;
  void sipp.then(() => (sippEnded = true));

  const status = (sid: string) => http(cluster.edge.edge, 'GET', `/v1/outbound-calling/${sid}/status`, { headers: { 'x-service-auth-token': token } });
  const placed = await http(cluster.edge.edge, 'POST', '/v1/outbound-calling', { body: { to_number: '+14155550123', encryption: 'UDP/RTP', metadata: { 'X-Order': 'F-1' } }, headers: { 'x-service-auth-token': token } });
  t.equal(placed.status, 200, placed.text);
  const sid = placed.body.call_sid;
  for (;;) {
    const r = await status(sid);
    if (r.body.status === 'calling') break;
    t.not(r.body.status, 'failure', 'not failed before the kill');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const owner = (await cluster.ownerOf('call', sid))!;
  t.ok(owner, 'a worker owns the call');
  owner.child.kill('SIGKILL');

  /** The statuses seen until a terminal one, which is returned with them. */
  const settled = async () => {
    const seen: string[] = [];
    for (;;) {
      const r = await status(sid);
      if (seen[seen.length - 1] !== r.body.status) seen.push(r.body.status);
      if (r.body.status === 'success' || r.body.status === 'failure') return { last: r.body, seen };
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  return { cluster, sid, owner, sipp, sippEnded: () => sippEnded, settled };
}

t.test('SIGKILL the worker of a ringing outbound call: one INVITE, and the call still ends in success', needs(), async (t) => {
  // sipp rings for 8 s before it answers (time for the kill, the lease to lapse and the wake-up), then holds
  // the line 15 s: the status must say success while the call is up, not only once its hang-up is reported.
  const call = await killedWhileCalling(t, 8000, 15_000);
  const { last, seen } = await call.settled();
  t.same(last, { status: 'success', reason: '' }, `the call was answered after the failover (${seen.join(' → ')})`);
  t.notOk(call.sippEnded(), 'success shows while the far end is still on the line');
  const newOwner = await call.cluster.ownerOf('call', call.sid);
  t.not(newOwner?.worker, call.owner.worker, 'another worker holds the call now');
  const run = await call.sipp;
  t.equal(run.code, 0, 'sipp took one INVITE (its only call), the ACK, and its BYE was answered');
  if (run.code !== 0) t.comment(run.out.slice(-3000));
});

t.test("answered and hung up while the call's worker is dead: the hang-up reaches a call still calling, a success with its conversation", needs(), async (t) => {
  // sipp answers 2.5 s after the INVITE (after the kill) and hangs up 0.1 s later: the answer went to the dead
  // worker, and the hang-up activates the call on the shard's new owner before its wake-up (5 s after calling)
  // sends the dial again.
  const call = await killedWhileCalling(t, 2500, 100);
  const run = await call.sipp;
  t.equal(run.code, 0, 'sipp took one INVITE, the ACK, and its BYE was answered');
  if (run.code !== 0) t.comment(run.out.slice(-3000));
  const { last, seen } = await call.settled();
  t.same(last, { status: 'success', reason: '' }, `answered (${seen.join(' → ')})`);
  // The operator's view of the call's actor: ended, with what the hang-up carried.
  const actor = await eventually(async () => {
    const d = await call.cluster.describe('call', call.sid);
    return d?.context.endedAt ? d : null;
  }, 20_000, 'the call to end');
  t.equal(actor.context.answeredAt, actor.context.callingAt, 'the hang-up reached it while calling: the answer was lost');
  t.match(actor.context, { conversationId: String, sipStatus: 200 }, 'the conversation and the SIP status of the answer, from the hang-up');
});
