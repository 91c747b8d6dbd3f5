/**
 * A long answer on a call (docs/voice.md, "Long answers"): a start function says some 60,000 characters. The
 * whole text went to the speech engine at once, its WAV was buffered and converted on the main thread (seconds,
 * hundreds of megabytes: every call and chat of the process stalled) and the call would have read it out for half
 * an hour. Now the call speaks at most SPOKEN_ANSWER_MAX_CHARS of it, synthesized piece by piece as it plays,
 * while another account's chat is answered; the transcript keeps the whole text. The calls are placed by hand
 * (raw SIP from the test, `callerMedia` for the caller's audio), so that the test acts on what the caller hears.
 */
import t, { type Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { createServer, type IncomingMessage } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { eventually } from './helpers/eventually.js';
import { finalOf, invite, udpPeer, until } from './helpers/raw-sip.js';
import { bindNumber, callerMedia, loud, speak, voicePlatform, voiceTools } from './helpers/voice.js';
import { SPEECH_PIECE_CHARS, SPOKEN_ANSWER_MAX_CHARS, spokenPieces } from '../gateway/media/speech/pieces.js';

const needsTools = () => (voiceTools() ? {} : { skip: 'sipp, espeak-ng or pocketsphinx is not installed' });
t.setTimeout(420_000);

const SENTENCE = 'This is one sentence of a long reading, and it goes on for a while. ';
const REPEAT = 900;
/** About 61,000 characters: the start function builds it (the sandbox lets it say up to 256 K). */
const LONG = SENTENCE.repeat(REPEAT);
const START = `function start(conv) { conv.say(${JSON.stringify(SENTENCE)}.repeat(${REPEAT})); }`;

/** Publishes the branch and promotes it to live (after a change to it made after `chatProject` did so). */
async function publishLive(project: ChatProject): Promise<void> {
  const base = `/v1/agents/${project.agentId}`;
  const pub = await project.api('POST', `${base}/deployments/publish`, { environment: 'sandbox' });
  const pre = await project.api('POST', `${base}/deployments/${pub.body.deployment.id}/promote`);
  await project.api('POST', `${base}/deployments/${pre.body.deployment.id}/promote`);
}

/** Calls `number` on the gateway at `sip` from raw SIP; resolves once the call is answered and its media flows. */
async function placeCall(t: Test, sip: number, number: string) {
  const caller = await callerMedia();
  const peer = await udpPeer(sip);
  t.teardown(() => {
    caller.close();
    peer.socket.close();
  });
  const call = invite({ sipPort: sip, number }, peer, { address: '127.0.0.2', port: caller.port });
  peer.send(call.text);
  const answer = await until(() => finalOf(peer.got, call.callId), 30_000);
  t.match(answer, /^SIP\/2\.0 200 /, 'the call is answered');
  const toHeader = /^To: (.*)$/im.exec(answer)![1]!.trim();
  peer.send(call.ack(toHeader));
  await caller.connected();
  return { caller, peer, call, toHeader, byeFromUs: () => peer.got.some((m) => /^BYE /.test(m)) };
}

t.test('a start that says 60,000 characters: the call speaks its first 2,000 piece by piece and ends, another account chats meanwhile', needsTools(), async (t) => {
  // A silence turn half a second after the speech has played: its answer ends the call.
  const v = await voicePlatform('sb-voice-long-', { VOICE_NO_INPUT_MS: '500' });
  t.teardown(() => v.stop());
  const p = v.p;
  const number = '+442079460170';
  const voice = await chatProject(p, { name: 'Long Reader Co', functions: { start: START, turn: 'function turn(conv, m) { conv.end(); return "Goodbye."; }' } });
  // The fastest voice rate: the spoken part lasts under a minute.
  const rate = await voice.api('PUT', `/v1/agents/${voice.agentId}/branches/main/voice`, { voice: '', rate: 400 });
  t.equal(rate.status, 200, 'voice rate set');
  await publishLive(voice);
  await bindNumber(voice.api, voice.agentId, number, { host: '127.0.0.2', port: 5 });
  const other = await chatProject(p, { name: 'Other Account Co', functions: { turn: 'function turn(conv, m) { return "other-ok"; }' } });
  const chat = (await other.chat('create')).body.conversation_id as string;

  const { caller, byeFromUs } = await placeCall(t, v.sip, number);
  await eventually(async () => caller.heard.voiced > 0 || byeFromUs(), 120_000, 'the speech or a hang-up', 100);
  t.ok(caller.heard.voiced > 0, 'the caller hears the long answer (RTP with speech flows)');

  // Another account's chat turn, asked while the call speaks, is answered while the speech still plays.
  const reply = await other.chat('respond', { conversation_id: chat, message: 'hi' });
  t.equal(reply.status, 200, "the other account's chat turn is answered");
  t.equal(reply.body.response, 'other-ok');
  const heardAtReply = caller.heard.voiced;
  t.notOk(byeFromUs(), 'the call was still on when it was answered');

  // The spoken part played, the silence turn's goodbye ends the call: the answer did not play its 60,000 characters.
  await eventually(async () => byeFromUs(), 240_000, "the platform's BYE after the spoken part", 200);
  t.ok(byeFromUs(), 'the call ends after the spoken part and the goodbye');
  t.ok(caller.heard.voiced > heardAtReply + 100, `the speech went on after the chat turn was answered (${heardAtReply} voiced frames then, ${caller.heard.voiced} in all)`);
  t.match(p.stdout(), /answer too long to speak/, 'the cut is logged');
  // What the caller heard is the spoken part and the goodbye, as long as espeak-ng makes them (with room for the
  // pieces' own starts and ends): not the 60,000 characters (nor the few minutes of audio one synthesis may make).
  const reference = speak(`${LONG.slice(0, SPOKEN_ANSWER_MAX_CHARS)} Goodbye.`, v.dir, { rate: 400 });
  let referenceVoiced = 0;
  for (let i = 0; i + 160 <= reference.length; i += 160) if (loud(reference.subarray(i, i + 160))) referenceVoiced++;
  t.ok(caller.heard.voiced <= referenceVoiced * 1.25, `the caller heard at most the spoken part: ${caller.heard.voiced} voiced frames, ${referenceVoiced} in SPOKEN_ANSWER_MAX_CHARS and the goodbye spoken whole`);

  const read = conversationsClient(p, voice, await conversationsKey(p, voice));
  const c = await eventually(async () => ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((x: any) => x.to_number === number && x.in_progress === false), 60_000, 'the ended call');
  t.equal(c.turns[0].agent_response, LONG, 'the transcript keeps the whole answer');
  t.equal(c.turns.at(-1).agent_response, 'Goodbye.', 'then the goodbye of the silence turn');
});

const body = (rq: IncomingMessage) =>
  new Promise<Buffer>((r) => {
    const c: Buffer[] = [];
    rq.on('data', (d) => c.push(d));
    rq.on('end', () => r(Buffer.concat(c)));
  });

t.test('through a speech service: each request is one piece, and the caller hears the first before the rest are asked for', needsTools(), async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-voice-long-tts-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // A stand-in speech service: espeak-ng's WAV of each input (fast), each input kept.
  const inputs: string[] = [];
  const server = createServer(async (rq, rs) => {
    const j = JSON.parse((await body(rq)).toString());
    inputs.push(j.input);
    const wav = join(dir, `tts-${inputs.length}.wav`);
    const e = spawnSync('espeak-ng', ['-v', 'en-us', '-s', '300', '-w', wav, '--stdin'], { input: j.input });
    if (e.status !== 0) return void rs.writeHead(500).end();
    rs.writeHead(200, { 'content-type': 'audio/wav' }).end(readFileSync(wav));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise((r) => server.close(r)));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
  const v = await voicePlatform('sb-voice-long-svc-', { TTS_BASE_URL: url, TTS_API_KEY: 'k', VOICE_NO_INPUT_MS: '600000' });
  t.teardown(() => v.stop());
  const number = '+442079460171';
  const voice = await chatProject(v.p, { name: 'Long Service Co', functions: { start: START } });
  await bindNumber(voice.api, voice.agentId, number, { host: '127.0.0.2', port: 5 });

  const { caller, byeFromUs, peer, call, toHeader } = await placeCall(t, v.sip, number);
  await eventually(async () => caller.heard.voiced > 0 || byeFromUs(), 120_000, 'the speech or a hang-up', 100);
  t.ok(caller.heard.voiced > 0, 'the caller hears the answer');
  const { pieces } = spokenPieces(LONG);
  t.ok(inputs.length < pieces.length, `heard after ${inputs.length} of its ${pieces.length} pieces were asked for`);
  t.ok(inputs.length > 0 && inputs.every((x) => x.length <= SPEECH_PIECE_CHARS), `each request at most ${SPEECH_PIECE_CHARS} characters (${inputs.map((x) => x.length).join(', ')})`);
  t.same(inputs, pieces.slice(0, inputs.length), 'the pieces of the spoken part, in order');
  t.ok(pieces.join(' ').length <= SPOKEN_ANSWER_MAX_CHARS, 'of at most SPOKEN_ANSWER_MAX_CHARS in all');
  peer.send(call.request('BYE', 2, toHeader));
  await until(() => peer.got.find((m) => /^SIP\/2\.0 200 /.test(m) && /^CSeq: 2 BYE/im.test(m)), 30_000);
});
