/**
 * Bridged transfers (docs/telephony.md, `transfer: bridge` on a telephony connector): a handoff on a call
 * through such a trunk makes the media gateway call the destination itself and relay the audio, and the
 * bridge's end reaches the conversation through the bridge-ended path, as an outside telephony stack's POST
 * does: the project's `bridge_ended` function runs once and the record's state holds the durations.
 * Real parts: sipp as the caller's signalling and as the destination (`-rtp_echo`), the caller's audio from
 * a socket the test plays, the Conversations API for the record; raw SIP over UDP for what sipp cannot be (a
 * destination that answers, then goes silent).
 */
import t, { type Test } from 'tap';
import dgram from 'node:dgram';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { bindNumber, callerMedia, quietPort, runSipp, scenario, voiceSuite, voiceTools } from './helpers/voice.js';
import { eventually } from './helpers/eventually.js';
import { http } from './helpers/http.js';
import { admin } from './helpers/tenants.js';
import { audioOffer, finalOf, invite as rawInvite, responseTo, udpPeer, until } from './helpers/raw-sip.js';

const needsTools = () => (voiceTools() ? {} : { skip: 'sipp, espeak-ng or pocketsphinx is not installed' });
t.setTimeout(300_000);
/** The caller's RTP SSRC (`callerMedia`): packets with it that come back to the caller went through the bridge and the destination's echo. */
const CALLER_SSRC = 0x1234abcd;
/** The destination answers with the caller's codec (the relay does not transcode). */
const PCMU = { PT: 0, CODEC: 'PCMU' };

const v = voiceSuite(t, 'sb-bridge-', { VOICE_INTER_DIGIT_MS: '300', VOICE_NO_INPUT_MS: '60000', VOICE_TRANSFER_RING_TIMEOUT_MS: '4000' });

const BRIDGE_ENDED = `function bridge_ended(conv, bridge) {
  conv.state.bridge_runs = (conv.state.bridge_runs || 0) + 1;
  conv.state.bridge_seen = bridge.bridge_duration_seconds + '/' + bridge.call_duration_seconds;
}`;

/** A project whose calls hand off to `destination` when the caller keys a digit, on a trunk that bridges. */
async function bridgingProject(name: string, number: string, destination: string, sippPort: number): Promise<ChatProject> {
  const project = await chatProject(v.p, {
    name,
    functions: {
      start: 'function start(conv) { conv.say("Press zero for the desk."); }',
      turn: `function turn(conv, message) { conv.handoff(${JSON.stringify(destination)}, 'caller_pressed_zero'); return 'Putting you through.'; }`,
      bridge_ended: BRIDGE_ENDED,
    },
  });
  await bindNumber(project.api, project.agentId, number, { host: '127.0.0.2', port: sippPort, transfer: 'bridge' });
  return project;
}

/** The project's one VOICE-SIP conversation, once its state records the bridge's end. */
async function bridgedRecord(project: ChatProject): Promise<any> {
  const read = conversationsClient(v.p, project, await conversationsKey(v.p, project));
  return eventually(async () => {
    const c = ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? [])[0];
    return c && c.in_progress === false && c.state?.bridge_ended ? c : null;
  });
}

/** The caller's audio: counts the packets of its own that come back through the bridge. */
async function caller() {
  const echoed = { packets: 0 };
  const media = await callerMedia({ onPacket: (m) => void (m.readUInt32BE(8) === CALLER_SSRC && echoed.packets++) });
  return { media, echoed };
}

t.test('a bridged transfer: the destination is called and both hear each other; the caller hangs up, bridge_ended runs with the durations', needsTools(), async (t) => {
  const number = '+442079460301';
  const deskPort = await quietPort();
  const callerPort = await quietPort();
  const project = await bridgingProject('Bridge Co', number, `sip:desk@127.0.0.2:${deskPort}`, callerPort);
  const desk = runSipp({ scenario: scenario('bridge-destination.xml', v.dir, PCMU), port: deskPort, mediaPort: await quietPort(), dir: v.dir, extra: ['-rtp_echo'] });
  const { media, echoed } = await caller();
  t.teardown(() => media.close());
  const call = runSipp({ scenario: scenario('inbound-hold.xml', v.dir, { NUMBER: number, AUDIO_IP: '127.0.0.2', AUDIO_PORT: media.port, HOLD_MS: 16000 }), target: `127.0.0.1:${v.sip}`, port: callerPort, mediaPort: await quietPort(), dir: v.dir });
  await media.connected();
  // The greeting heard, the caller keys 0; then its own stream comes back from the destination's echo.
  await media.until(() => media.heard.voiced >= 10);
  media.key('0');
  await media.until(() => echoed.packets >= 50);
  const [run, deskRun] = await Promise.all([call, desk]);
  t.equal(run.code, 0, 'the caller hung up normally', { out: run.out.slice(-3000) });
  t.equal(deskRun.code, 0, 'the destination was called, answered, and got the BYE when the caller hung up', { out: deskRun.out.slice(-3000) });
  t.ok(echoed.packets >= 50, `the caller's audio reached the destination and its echo came back (${echoed.packets} packets)`);

  const c = await bridgedRecord(project);
  t.equal(c.handoff, true, 'the record has the handoff');
  t.equal(c.handoff_destination, `sip:desk@127.0.0.2:${deskPort}`);
  const b = c.state.bridge_ended;
  t.ok(b.bridge_duration_seconds > 0.5, `the bridge lasted (${b.bridge_duration_seconds} s)`);
  t.ok(b.call_duration_seconds > b.bridge_duration_seconds, `the call lasted longer than its bridge (${b.call_duration_seconds} s)`);
  t.ok(b.call_duration_seconds < 60, 'counted from the call, not from anything older');
  t.equal(c.state.bridge_runs, 1, 'bridge_ended ran once');
  t.equal(c.state.bridge_seen, `${b.bridge_duration_seconds}/${b.call_duration_seconds}`, 'with the durations it recorded');
});

/**
 * A call to a bridging project that keys 0 once it hears the greeting and stays on the line until the platform
 * hangs up; the destination is sipp running `desk` (a scenario and its values) with `-rtp_echo`.
 */
async function callUntilHungUp(name: string, number: string, desk: { file: string; vars: Record<string, string | number> }) {
  const deskPort = await quietPort();
  const callerPort = await quietPort();
  const project = await bridgingProject(name, number, `sip:desk@127.0.0.2:${deskPort}`, callerPort);
  const deskRun = runSipp({ scenario: scenario(desk.file, v.dir, desk.vars), port: deskPort, mediaPort: await quietPort(), dir: v.dir, extra: ['-rtp_echo'] });
  const { media, echoed } = await caller();
  const call = runSipp({ scenario: scenario('inbound-bridge-wait.xml', v.dir, { NUMBER: number, AUDIO_IP: '127.0.0.2', AUDIO_PORT: media.port }), target: `127.0.0.1:${v.sip}`, port: callerPort, mediaPort: await quietPort(), dir: v.dir });
  try {
    await media.connected();
    await media.until(() => media.heard.voiced >= 10);
    media.key('0');
    const [run, destination] = await Promise.all([call, deskRun]);
    return { project, run, destination, echoed };
  } finally {
    media.close();
  }
}

/**
 * A destination in raw SIP on 127.0.0.2 that answers each INVITE 200 with `sdp` (of its audio socket, which echoes
 * what it gets), then nothing more: not our BYE, which its transaction retransmits until it gives up (64·T1, 32 s).
 */
async function goneDesk(t: Test, sdp: (media: { address: string; port: number }) => string = audioOffer) {
  const desk = dgram.createSocket('udp4');
  const deskMedia = dgram.createSocket('udp4');
  await Promise.all([desk, deskMedia].map((s) => new Promise<void>((r) => s.bind(0, '127.0.0.2', () => r()))));
  t.teardown(() => (desk.close(), deskMedia.close()));
  deskMedia.on('message', (m, from) => deskMedia.send(m, from.port, from.address));
  const port = desk.address().port;
  const got: string[] = [];
  desk.on('message', (m, from) => {
    const text = m.toString('latin1');
    got.push(text);
    if (!text.startsWith('INVITE ')) return;
    const answer = responseTo(text, '200 OK', { toTag: 'desk', contact: `sip:desk@127.0.0.2:${port}`, sdp: sdp({ address: '127.0.0.2', port: deskMedia.address().port }) });
    desk.send(Buffer.from(answer, 'latin1'), from.port, from.address);
  });
  return { uri: `sip:desk@127.0.0.2:${port}`, got, byes: () => got.filter((m) => m.startsWith('BYE ')).length };
}

/** A raw-SIP caller of `number` that hears the greeting and keys 0 (the handoff), its dialog up. */
async function callAndKeyZero(t: Test, number: string, peer: Awaited<ReturnType<typeof udpPeer>>) {
  const { media, echoed } = await caller();
  t.teardown(() => media.close());
  const call = rawInvite({ sipPort: v.sip, number }, peer, { address: '127.0.0.2', port: media.port });
  peer.send(call.text);
  const answer = await until(() => finalOf(peer.got, call.callId));
  t.match(answer, /^SIP\/2\.0 200 /, 'the caller is answered');
  const to = /^To: (.*)$/im.exec(answer)![1]!.trim();
  peer.send(call.ack(to));
  await media.connected();
  await media.until(() => media.heard.voiced >= 10);
  media.key('0');
  return { call, to, media, echoed };
}

t.test('a bridged destination that answers, then goes silent: the caller hangs up, and bridge_ended is told while our BYE to the destination is still unanswered', needsTools(), async (t) => {
  const number = '+442079460304';
  const desk = await goneDesk(t);
  const peer = await udpPeer(v.sip);
  t.teardown(() => peer.socket.close());
  const project = await bridgingProject('Bridge Gone Co', number, desk.uri, peer.port);

  const { call, to, media, echoed } = await callAndKeyZero(t, number, peer);
  await media.until(() => echoed.packets >= 20);
  t.ok(desk.got.some((m) => m.startsWith('ACK ')), 'the destination was called, answered and ACKed, and the legs relayed');

  // The caller hangs up: the destination gets our BYE, and answers nothing.
  peer.send(call.request('BYE', 2, to));
  await until(() => (desk.byes() > 0 ? true : undefined));
  const c = await bridgedRecord(project);
  const b = c.state.bridge_ended;
  t.ok(b.bridge_duration_seconds > 0, `the bridge lasted (${b.bridge_duration_seconds} s)`);
  t.ok(b.call_duration_seconds > b.bridge_duration_seconds, `the call lasted longer (${b.call_duration_seconds} s)`);
  t.equal(c.state.bridge_runs, 1, 'bridge_ended ran once');
  // Told while the BYE is still unanswered: its transaction goes on retransmitting it after the record was seen.
  // (Told when the BYE gave up, the destination would get no more of it.)
  const seen = desk.byes();
  await until(() => (desk.byes() > seen ? true : undefined));
  t.pass('the conversation was told of the bridge\'s end while our BYE to the destination went unanswered');
});

t.test('a bridged destination that answers with another codec, then goes silent: the caller is hung up and bridge_ended told while our BYE to the destination is still unanswered', needsTools(), async (t) => {
  const number = '+442079460305';
  // A-law only, to a caller (and an INVITE) in µ-law: the relay does not transcode, so the answer cannot be bridged.
  const desk = await goneDesk(t, (m) => `v=0\r\no=- 1 1 IN IP4 ${m.address}\r\ns=-\r\nc=IN IP4 ${m.address}\r\nt=0 0\r\nm=audio ${m.port} RTP/AVP 8\r\na=rtpmap:8 PCMA/8000\r\na=sendrecv\r\n`);
  const peer = await udpPeer(v.sip);
  t.teardown(() => peer.socket.close());
  const project = await bridgingProject('Bridge Alaw Co', number, desk.uri, peer.port);

  const { call, echoed } = await callAndKeyZero(t, number, peer);
  // The destination answers, and gets our BYE at once; the caller then gets ours, as after a refused bridge.
  const callerBye = await until(() => peer.got.find((m) => m.startsWith('BYE ') && m.includes(call.callId)), 60_000);
  peer.send(responseTo(callerBye, '200 OK'));
  t.ok(desk.got.some((m) => m.startsWith('ACK ')) && desk.byes() > 0, 'the destination was answered, ACKed and hung up');
  const c = await bridgedRecord(project);
  t.equal(c.state.bridge_ended.bridge_duration_seconds, 0, 'no bridge');
  t.equal(c.state.bridge_runs, 1, 'bridge_ended ran once');
  t.equal(echoed.packets, 0, 'nothing was relayed');
  // All that while our BYE to the destination went unanswered: its transaction goes on retransmitting it. (Hung up
  // once that BYE gave up, the caller's BYE and the report came after its last copy.)
  const seen = desk.byes();
  await until(() => (desk.byes() > seen ? true : undefined));
  t.pass('the caller was hung up and the conversation told while our BYE to the destination went unanswered');
});

t.test('a bridged transfer whose destination hangs up: the caller gets the BYE', needsTools(), async (t) => {
  const { project, run, destination, echoed } = await callUntilHungUp('Bridge Hangup Co', '+442079460302', { file: 'bridge-destination-hangs-up.xml', vars: { ...PCMU, HOLD_MS: 3000 } });
  t.equal(destination.code, 0, 'the destination answered and hung up', { out: destination.out.slice(-3000) });
  t.equal(run.code, 0, 'the caller got the BYE', { out: run.out.slice(-3000) });
  t.ok(echoed.packets > 0, 'the legs were bridged meanwhile');
  const b = (await bridgedRecord(project)).state.bridge_ended;
  t.ok(b.bridge_duration_seconds >= 2.5 && b.bridge_duration_seconds < 30, `the bridge lasted about as long as the destination held it (${b.bridge_duration_seconds} s)`);
});

t.test('a bridged transfer the destination refuses: the caller gets the BYE, bridge_ended runs with a bridge of 0 s', needsTools(), async (t) => {
  const { project, run, destination, echoed } = await callUntilHungUp('Bridge Busy Co', '+442079460303', { file: 'outbound-reject.xml', vars: { STATUS: 486, REASON: 'Busy Here' } });
  t.equal(destination.code, 0, 'the destination was called and refused', { out: destination.out.slice(-3000) });
  t.equal(run.code, 0, 'the caller got the BYE', { out: run.out.slice(-3000) });
  t.equal(echoed.packets, 0, 'nothing was bridged');
  const c = await bridgedRecord(project);
  t.equal(c.state.bridge_ended.bridge_duration_seconds, 0, 'no bridge');
  t.ok(c.state.bridge_ended.call_duration_seconds > 0, 'the call itself lasted');
  t.equal(c.state.bridge_runs, 1);
  t.equal(c.handoff, true);
});

t.test('an outbound call through a bridging trunk: the start function hands off, the destination is bridged until the called party hangs up', needsTools(), async (t) => {
  const deskPort = await quietPort();
  const calleePort = await quietPort();
  const destination = `sip:desk@127.0.0.2:${deskPort}`;
  const project = await chatProject(v.p, {
    name: 'Bridge Dialler',
    functions: {
      start: `function start(conv) { conv.say("Connecting you."); conv.handoff(${JSON.stringify(destination)}, 'outbound_bridge'); }`,
      bridge_ended: BRIDGE_ENDED,
    },
  });
  const trunk = await project.api('POST', `/v1/agents/${project.agentId}/telephony/connectors`, { name: 'bridging trunk', host: '127.0.0.2', port: calleePort, transport: 'udp', transfer: 'bridge' });
  t.equal(trunk.status, 201, trunk.text);
  const connector = await admin(v.p)('POST', '/connectors', { account_id: project.accountId, project_id: project.agentId, kind: 'outbound', telephony_connector_id: trunk.body.id, from_number: '+14155550100' });
  t.equal(connector.status, 201, connector.text);
  // The called party answers in A-law: the destination is offered A-law only, and answers so.
  const desk = runSipp({ scenario: scenario('bridge-destination.xml', v.dir, { PT: 8, CODEC: 'PCMA' }), port: deskPort, mediaPort: await quietPort(), dir: v.dir, extra: ['-rtp_echo'] });
  const callee = runSipp({ scenario: scenario('outbound-answer.xml', v.dir, { HEADER: 'X-Order', VALUE: 'B-1', AUDIO_IP: '127.0.0.2', AUDIO_PORT: await quietPort(), RING_MS: 200, HOLD_MS: 10000 }), port: calleePort, mediaPort: await quietPort(), dir: v.dir });
  await new Promise((r) => setTimeout(r, 300));
  const r = await http(v.p.edge, 'POST', '/v1/outbound-calling', { body: { to_number: '+14155550123', encryption: 'UDP/RTP', metadata: { 'X-Order': 'B-1' } }, headers: { 'x-service-auth-token': connector.body.token } });
  t.equal(r.status, 200, r.text);
  let deskDone = false;
  void desk.then(() => (deskDone = true));
  // The call is answered, and its status says so, while the bridge is still up: the dial does not wait for the transfer.
  const status = await eventually(async () => {
    const b = (await http(v.p.edge, 'GET', `/v1/outbound-calling/${r.body.call_sid}/status`, { headers: { 'x-service-auth-token': connector.body.token } })).body;
    return b.status === 'success' || b.status === 'failure' ? b : null;
  });
  t.equal(status.status, 'success', `answered (${status.reason})`);
  t.notOk(deskDone, 'reported before the bridged call ended');
  const [calleeRun, deskRun] = await Promise.all([callee, desk]);
  t.equal(calleeRun.code, 0, 'the called party answered, then hung up', { out: calleeRun.out.slice(-3000) });
  t.equal(deskRun.code, 0, 'the destination was called through the bridge and got the BYE', { out: deskRun.out.slice(-3000) });
  const c = await bridgedRecord(project);
  t.equal(c.state.call_sid, r.body.call_sid, 'the outbound call’s conversation');
  t.equal(c.handoff_destination, destination);
  t.ok(c.state.bridge_ended.bridge_duration_seconds > 1, `bridged until the hang-up (${c.state.bridge_ended.bridge_duration_seconds} s)`);
  t.equal(c.state.bridge_runs, 1);
});
