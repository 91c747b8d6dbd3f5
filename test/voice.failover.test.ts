/**
 * A worker killed mid-call loses nothing: over NATS, with the media gateway in its own process, the worker
 * that owns a call's conversation is SIGKILLed between two turns; the caller stays on the line and the next
 * turn is answered by another worker from the stored conversation.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { natsAvailable } from './helpers/nats.js';
import { startCluster } from './helpers/cluster.js';
import { startPlatform } from './helpers/platform.js';
import { chatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { bindNumber, MEDIA_ENV, mediaPorts, runSipp, scenario, SIPP_PCAPS, voiceTools, quietPort } from './helpers/voice.js';

const ready = natsAvailable() && voiceTools();
const needs = ready ? {} : { skip: 'nats-server, sipp, espeak-ng or pocketsphinx is not installed' };

t.test('SIGKILL the worker of a call in the middle: the call goes on, the next turn is answered elsewhere', needs, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-voice-failover-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const cluster = await startCluster({ workers: 2, leaseTtlMs: 1500, passivateAfterMs: 60_000 });
  t.teardown(() => cluster.stop());
  const media = await startPlatform({
    roles: ['media'],
    dataDir: cluster.dataDir,
    env: { ...MEDIA_ENV, NATS_URL: cluster.natsUrl, SHARDS: String(cluster.shardCount), LEASE_TTL_MS: '1500', OPERATOR_TOKEN: cluster.edge.operatorToken, VOICE_NO_INPUT_MS: '60000' },
  });
  t.teardown(() => media.stop());
  const { sip } = mediaPorts(media.stdout());

  const project = await chatProject(cluster.edge, {
    name: 'Failover Co',
    functions: {
      start: 'function start(conv) { conv.say("Key a digit."); }',
      turn: 'function turn(conv, message) { conv.state.keyed = (conv.state.keyed || "") + message; return "You pressed " + message + "."; }',
    },
  });
  const number = '+442079460126';
  const sippPort = await quietPort();
  await bindNumber(project.api, project.agentId, number, { host: '127.0.0.2', port: sippPort });
  const file = scenario('inbound-digits.xml', dir, {
    NUMBER: number,
    AUDIO_IP: '127.0.0.2',
    AUDIO_PORT: await quietPort(),
    GREETING_MS: 2000,
    DIGIT_1: join(SIPP_PCAPS, 'dtmf_2833_4.pcap'),
    PAUSE_MS: 9000,
    DIGIT_2: join(SIPP_PCAPS, 'dtmf_2833_2.pcap'),
    END_MS: 6000,
  });
  const call = runSipp({ scenario: file, target: `127.0.0.1:${sip}`, port: sippPort, mediaPort: await quietPort(), dir });

  // After the first digit's turn: find the conversation and the worker that owns it, and kill that worker.
  const read = conversationsClient(cluster.edge, project, await conversationsKey(cluster.edge, project));
  let conv: any = null;
  for (let i = 0; i < 200 && !conv; i++) {
    const rows = (await read({ channel: 'VOICE-SIP' })).body.conversations ?? [];
    conv = rows.find((c: any) => c.turns.some((x: any) => x.user_input_dtmf === '4')) ?? null;
    if (!conv) await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(conv, 'the first digit was a turn');
  const owner = (await cluster.ownerOf('conversation', conv.id))!;
  const victim = cluster.workers.find((w) => w.worker === owner.worker)!;
  victim.child.kill('SIGKILL');

  const done = await call;
  t.equal(done.code, 0, 'the caller stayed on the line to the end (its BYE was answered)', { out: done.out.slice(-2000) });
  let after: any = null;
  for (let i = 0; i < 200 && !after; i++) {
    const rows = (await read({ channel: 'VOICE-SIP' })).body.conversations ?? [];
    after = rows.find((c: any) => c.id === conv.id && c.in_progress === false) ?? null;
    if (!after) await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(after, 'the conversation ended with the call');
  const keyed = after.turns.filter((x: any) => x.user_input_dtmf !== '');
  t.same(keyed.map((x: any) => x.user_input_dtmf), ['4', '2'], 'both digits, once each');
  t.same(keyed.map((x: any) => x.agent_response), ['You pressed 4.', 'You pressed 2.'], 'both answered');
  t.equal(after.state.keyed, '42', 'the state from before the kill carried over');
  const newOwner = await cluster.ownerOf('conversation', conv.id);
  t.not(newOwner?.worker, owner.worker, 'another worker holds the conversation now');
});
