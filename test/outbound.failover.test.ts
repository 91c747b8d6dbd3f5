/**
 * A worker killed mid-call loses nothing, for outbound calls: over NATS, with the media gateway in its own
 * process, the worker owning a call's actor is SIGKILLed while the far end (sipp) is still ringing. Another
 * worker takes the shard, the call's wake-up timer activates it there, its dial request is sent again with
 * the same call_sid, and the media gateway answers it with the call it already placed: one INVITE, and the
 * status goes on to success. Needs nats-server and sipp (skipped locally without them, failed with CI=true).
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSocket } from 'node:dgram';
import { chatProject } from './helpers/chat.js';
import { startCluster } from './helpers/cluster.js';
import { http } from './helpers/http.js';
import { natsAvailable } from './helpers/nats.js';
import { startPlatform } from './helpers/platform.js';
import { admin } from './helpers/tenants.js';
import { MEDIA_ENV, runSipp, scenario, quietPort } from './helpers/voice.js';
import { toolAvailable } from './helpers/tools.js';

const ready = natsAvailable() && toolAvailable('/usr/bin/sipp', 'sip-tester') && toolAvailable('/usr/bin/espeak-ng', 'espeak-ng');
const needs = ready ? {} : { skip: 'nats-server, sipp or espeak-ng is not installed' };

t.test('SIGKILL the worker of a ringing outbound call: one INVITE, and the call still ends in success', needs, async (t) => {
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
  // sipp rings for 8 s before it answers (time for the kill, the lease to lapse and the wake-up), then holds
  // the line 15 s: the status must say success while the call is up, not only once its hang-up is reported.
  const sipp = runSipp({
    scenario: scenario('outbound-answer.xml', dir, { HEADER: 'X-Order', VALUE: 'F-1', AUDIO_IP: '127.0.0.2', AUDIO_PORT: audio.address().port, RING_MS: 8000, HOLD_MS: 15000 }),
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

  const seen: string[] = [];
  for (;;) {
    const r = await status(sid);
    if (seen[seen.length - 1] !== r.body.status) seen.push(r.body.status);
    if (r.body.status === 'success' || r.body.status === 'failure') {
      t.same(r.body, { status: 'success', reason: '' }, `the call was answered after the failover (${seen.join(' → ')})`);
      t.notOk(sippEnded, 'success shows while the far end is still on the line');
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const newOwner = await cluster.ownerOf('call', sid);
  t.not(newOwner?.worker, owner.worker, 'another worker holds the call now');
  const run = await sipp;
  t.equal(run.code, 0, 'sipp took one INVITE (its only call), the ACK, and its BYE was answered');
  if (run.code !== 0) t.comment(run.out.slice(-3000));
});
