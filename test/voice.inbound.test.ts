import t from 'tap';
import dgram from 'node:dgram';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import alawmulaw from 'alawmulaw';
import { startPlatform, removeDir } from './helpers/platform.js';
import { chatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { freePort } from './helpers/nats.js';
import { bindNumber, MEDIA_ENV, mediaPorts, rtpPcap, runSipp, scenario, SIPP_PCAPS, speak, voiceTools } from './helpers/voice.js';

// Without sipp, espeak-ng or pocketsphinx these skip locally; with CI=true voiceTools() throws instead.
const needsTools = voiceTools() ? {} : { skip: 'sipp, espeak-ng or pocketsphinx is not installed' };
const NUMBER = '+442079460123';

/** A UDP socket on 127.0.0.2 that stands for the caller's audio port: counts the agent's RTP and its loudness. */
async function audioSink() {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.2', () => r()));
  const got = { packets: 0, voiced: 0, payloadTypes: new Set<number>() };
  socket.on('message', (m) => {
    got.packets++;
    got.payloadTypes.add(m[1] & 0x7f);
    const pcm = alawmulaw.mulaw.decode(m.subarray(12));
    let sum = 0;
    for (const s of pcm) sum += s * s;
    if (Math.sqrt(sum / pcm.length) > 300) got.voiced++;
  });
  return { port: socket.address().port, got, close: () => socket.close() };
}

t.test('an inbound call: spoken question and DTMF become turns of a VOICE-SIP conversation, the answers are spoken', needsTools, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-voice-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const p = await startPlatform({ env: { ...MEDIA_ENV, VOICE_NO_INPUT_MS: '60000', VOICE_END_SILENCE_MS: '600' } });
  t.teardown(async () => {
    await p.stop();
    removeDir(p.dataDir);
  });
  const { sip } = mediaPorts(p.stdout());
  const project = await chatProject(p, {
    name: 'Voice Co',
    topics: [['Opening hours', 'We are open from 9am to 5pm, Monday to Friday.'], ['Parking', 'Free parking is available behind the building.']],
    functions: { start: 'function start(conv) { conv.say("Hello, you are through to Acme. " + conv.sip_headers.get("x-customer-tier") + " line."); }' },
  });
  const sippPort = await freePort();
  await bindNumber(project.api, project.agentId, NUMBER, { host: '127.0.0.2', port: sippPort });

  const sink = await audioSink();
  t.teardown(() => sink.close());
  const question = join(dir, 'question.pcap');
  rtpPcap(speak('what are your opening hours', dir), question);
  const file = scenario('inbound-call.xml', dir, {
    NUMBER,
    AUDIO_IP: '127.0.0.2',
    AUDIO_PORT: sink.port,
    GREETING_MS: 4000,
    SPEECH_PCAP: question,
    ANSWER_MS: 6000,
    DIGIT_1: join(SIPP_PCAPS, 'dtmf_2833_4.pcap'),
    DIGIT_2: join(SIPP_PCAPS, 'dtmf_2833_2.pcap'),
    END_MS: 5000,
  });
  const run = await runSipp({ scenario: file, target: `127.0.0.1:${sip}`, port: sippPort, mediaPort: await freePort(), dir });
  t.equal(run.code, 0, 'sipp completed the call', { out: run.out.slice(-3000) });

  t.ok(sink.got.packets > 50, `the agent's speech reached the caller as RTP (${sink.got.packets} packets)`);
  t.ok(sink.got.voiced > 20, 'and it is sound, not silence');
  t.same([...sink.got.payloadTypes], [0], 'as PCMU, the codec the caller offered');

  const key = await conversationsKey(p, project);
  const read = conversationsClient(p, project, key);
  const rows = await waitFor(async () => {
    const r = await read({ channel: 'VOICE-SIP' });
    const done = (r.body.conversations ?? []).filter((c: any) => c.in_progress === false);
    return done.length ? done : null;
  });
  t.equal(rows.length, 1, 'one VOICE-SIP conversation');
  const c = rows[0];
  t.equal(c.channel, 'VOICE-SIP');
  t.equal(c.from_number, '+15550001111', 'from the caller');
  t.equal(c.to_number, NUMBER, 'to the bound number');
  t.equal(c.state.from_, '+15550001111', 'built-in state from_');
  t.equal(c.state.to, NUMBER, 'built-in state to');
  t.match(c.state.call_sid, /^IN-/, 'built-in state call_sid');
  t.match(c.turns[0].agent_response, /gold line/, 'the start function read the SIP header through conv.sip_headers');
  const spoken = c.turns.find((x: any) => x.user_input !== '');
  t.ok(spoken, 'a spoken turn');
  t.match(spoken.user_input, /opening/, `the question was recognised (${spoken?.user_input})`);
  t.match(spoken.agent_response, /9am to 5pm/, 'and answered from the topic');
  const keyed = c.turns.find((x: any) => x.user_input_dtmf !== '');
  t.ok(keyed, 'a DTMF turn');
  t.equal(keyed.user_input_dtmf, '42', 'the digits, in order');
  t.equal(keyed.user_input, '', 'with no words');
  t.ok(c.total_duration > 10, 'the call lasted as long as sipp held it');
  t.equal(c.metrics.CALL_DURATION, String(c.total_duration));
});

async function waitFor<T>(f: () => Promise<T | null>, ms = 20_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 200));
  }
}
