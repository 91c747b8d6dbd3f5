import t, { type Test } from 'tap';
import { waitForProjections } from './helpers/projections.js';
import dgram from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import wavefile from 'wavefile';
import fc from 'fast-check';
import { startPlatform, removeDir, type Platform } from './helpers/platform.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { bindNumber, callerMedia, loud, MEDIA_ENV, mediaPorts, rtpPcap, runSipp, scenario, speak, voiceTools, quietPort } from './helpers/voice.js';
import { eventually } from './helpers/eventually.js';

// Without sipp, espeak-ng or pocketsphinx these skip locally; with CI=true voiceTools() throws instead.
/** A fresh options object per test: tap writes a filtered-out test's skip onto the object it is given. */
const needsTools = () => (voiceTools() ? {} : { skip: 'sipp, espeak-ng or pocketsphinx is not installed' });
// Three calls of 20 to 40 s each, one of them waiting out its conversation's idle end: more than the suite's 180 s a file
// on a loaded machine.
t.setTimeout(300_000);
const CARD = '4111111111111111';
const RATE = 8000;

/** A UDP socket on 127.0.0.2 standing for the caller's audio port (the agent's RTP goes there). */
async function audioSink() {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.2', () => r()));
  return { port: socket.address().port, close: () => socket.close() };
}

/** `pcm` without its quiet start and end (speech said over and over then has no pause longer than its own). */
function trimmed(pcm: Int16Array): Int16Array {
  const frames = Math.floor(pcm.length / 160);
  let a = 0;
  let b = frames;
  while (a < b && !loud(pcm.subarray(a * 160, a * 160 + 160))) a++;
  while (b > a && !loud(pcm.subarray((b - 1) * 160, b * 160))) b--;
  return pcm.subarray(a * 160, b * 160);
}

/** GET .../audio as bytes. */
async function audio(p: Platform, project: ChatProject, key: string, conversationId: string, query = '', headers: Record<string, string> = {}, path?: { account?: string; project?: string }) {
  const url = new URL(`/v3/${path?.account ?? project.accountId}/${path?.project ?? project.agentId}/conversations/${conversationId}/audio${query ? `?${query}` : ''}`, p.edge);
  const res = await fetch(url, { headers: { 'x-api-key': key, ...headers } });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** A WAV as a player reads it: 8 kHz mono 16-bit, its samples. */
function samplesOf(t: { same: (a: any, b: any, m: string) => unknown; equal: (a: any, b: any, m: string) => unknown }, bytes: Buffer, what: string): Int16Array {
  const w = new wavefile.WaveFile(bytes);
  const fmt = w.fmt as { sampleRate: number; numChannels: number; bitsPerSample: number };
  t.same([fmt.sampleRate, fmt.numChannels, fmt.bitsPerSample], [RATE, 1, 16], `${what}: a WAV parser reads 8 kHz mono 16-bit`);
  const data = (w as unknown as { data: { chunkSize: number } }).data;
  t.equal(data.chunkSize, bytes.length - 44, `${what}: the data chunk's size is right`);
  return Int16Array.from(w.getSamples(false, Int16Array) as unknown as ArrayLike<number>);
}

const voicedFrames = (s: Int16Array) => {
  const out: number[] = [];
  for (let f = 0; (f + 1) * 160 <= s.length; f++) {
    let sum = 0;
    for (let i = f * 160; i < (f + 1) * 160; i++) sum += s[i] * s[i];
    if (Math.sqrt(sum / 160) > 300) out.push(f);
  }
  return out;
};

const inSpans = (i: number, spans: Array<{ start_ms: number; end_ms: number }>) => spans.some((s) => i >= Math.floor((s.start_ms * RATE) / 1000) && i < Math.ceil((s.end_ms * RATE) / 1000));

let p: Platform;
let sip: number;
let dir: string;
t.before(async () => {
  if (!voiceTools()) return;
  dir = mkdtempSync(join(tmpdir(), 'sb-rec-'));
  p = await startPlatform({ env: { ...MEDIA_ENV, VOICE_NO_INPUT_MS: '20000' } });
  sip = mediaPorts(p.stdout()).sip;
});
t.teardown(async () => {
  if (!p) return;
  await p.stop();
  if (!process.env.KEEP) removeDir(p.dataDir);
  else console.error("KEPT", p.dataDir);
  if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
});

/**
 * A project whose agent greets the caller and asks for a card number, `turn` answering, called from sipp on
 * 127.0.0.2 (`scenario`) with the caller's media played by the test (`callerMedia`); returned once the caller
 * has heard the greeting whole (sound, then a second of none): each step after waits for what the caller has
 * heard (or, spacing the digits, for its own frames), never for the platform to be quick enough.
 */
async function cardLineCall(t: Test, o: { name: string; number: string; scenario: string; turn: string }) {
  const project = await chatProject(p, {
    name: o.name,
    functions: { start: 'function start(conv) { conv.say("Hello, you are through to Acme payments. Please key your card number."); }', turn: o.turn },
  });
  const sippPort = await quietPort();
  await bindNumber(project.api, project.agentId, o.number, { host: '127.0.0.2', port: sippPort });
  const caller = await callerMedia();
  t.teardown(() => caller.close());
  const file = scenario(o.scenario, dir, { NUMBER: o.number, AUDIO_IP: '127.0.0.2', AUDIO_PORT: caller.port });
  const run = runSipp({ scenario: file, target: `127.0.0.1:${sip}`, port: sippPort, mediaPort: await quietPort(), dir });
  await caller.connected();
  await caller.until(() => caller.heard.voiced > 20 && caller.heard.quiet >= 50);
  return { project, caller, run };
}

t.test('a call is recorded per direction; the card number keyed over the caller\'s speech is muted in the redacted rendering', needsTools(), async (t) => {
  const number = '+442079460150';
  // The card number is answered at length, so that the agent speaks while the caller talks on; a 9 has the
  // call transferred (the conversation then ends with the call, after the hang-up; a call the agent ends with
  // conv.end() is the next test).
  const { project, caller, run } = await cardLineCall(t, {
    name: 'Rec Co',
    number,
    scenario: 'recording-live.xml',
    turn: 'function turn(conv, message) { if (message === "9") { conv.handoff("sip:desk@127.0.0.2:5999", "card_checked"); return "Goodbye."; } return "Thank you. Please stay on the line while I check the card with your bank, this will take a moment."; }',
  });
  // Then the caller talks, keying the card number while talking (digits 300 ms apart from 800 ms into the speech)...
  caller.talk(trimmed(speak('I am reading my card number to you now, please wait one moment while I find it, it is on the front of the card', dir)));
  await caller.frames(40);
  for (const d of CARD) {
    caller.key(d);
    await caller.frames(15);
  }
  // ...and talks on until it has heard a second of the agent's answer to the digits: both speak at once on the
  // line, however long the answer took to come.
  const heardBefore = caller.heard.voiced;
  await caller.until(() => caller.heard.voiced >= heardBefore + 50);
  caller.quiet();
  caller.key('9');
  await caller.frames(10);
  caller.key('#');
  const done = await run;
  caller.close();
  t.equal(done.code, 0, 'sipp completed the call: the agent transferred it after the 9 and hung up', { out: done.out.slice(-3000) });

  const dataKey = await conversationsKey(p, project, ['conversations_data']);
  const piiKey = await conversationsKey(p, project, ['conversations_data', 'pii']);
  const read = conversationsClient(p, project, piiKey);
  const c = await eventually(async () => ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((x: any) => x.in_progress === false) ?? null, 30_000);
  t.ok(c.turns.some((x: any) => x.user_input_dtmf === CARD), 'the card number reached the conversation as one DTMF turn (read with pii)');
  const masked = (await conversationsClient(p, project, dataKey)({ channel: 'VOICE-SIP' })).body.conversations[0];
  t.ok(masked.turns.some((x: any) => x.user_input_dtmf === '[redacted]'), 'a key without pii reads the transcript with the card number masked (pii_redaction on)');
  t.notOk(JSON.stringify(masked.turns).includes(CARD), 'nowhere in its turns', { row: JSON.stringify(masked).slice(0, 4000) });
  t.equal(c.audio?.available, true, 'the v3 row says the call has audio');
  // The recordings projector renders the redacted audio once the call has ended, before anyone asks for it.
  const listed = await eventually(async () => ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((x: any) => x.id === c.id && x.audio?.redactions)?.audio.redactions ?? null, 30_000);
  t.same(listed.map((s: any) => [s.kind, s.source]), [['card_number', 'dtmf']], 'the row lists what was muted: the keyed card number');

  const get = (key: string, q = '', h: Record<string, string> = {}) => audio(p, project, key, c.id, q, h);
  const raw = { user: await get(piiKey, 'direction=user'), agent: await get(piiKey, 'direction=agent'), combined: await get(piiKey) };
  for (const [k, r] of Object.entries(raw)) {
    t.equal(r.status, 200, `raw ${k}: 200`);
    t.equal(r.headers.get('content-type'), 'audio/wav');
    t.equal(r.headers.get('x-audio-redacted'), 'false', `raw ${k}: a key with pii gets raw audio`);
  }
  const user = samplesOf(t, raw.user.bytes, 'user');
  const agent = samplesOf(t, raw.agent.bytes, 'agent');
  const combined = samplesOf(t, raw.combined.bytes, 'combined');
  const userVoiced = voicedFrames(user);
  const agentVoiced = voicedFrames(agent);
  t.ok(userVoiced.length > 50, `the caller's track has sound where the caller spoke (${userVoiced.length} voiced frames)`);
  t.ok(agentVoiced.length > 50, `the agent's track has the agent's speech (${agentVoiced.length} voiced frames)`);
  // Each party on its own track: the agent's greeting (before the caller says anything) is not on the caller's.
  const greeting = agentVoiced.filter((f) => f < userVoiced[0]);
  t.ok(greeting.length > 20, 'the agent spoke before the caller');
  t.ok(greeting.every((f) => !userVoiced.includes(f)), 'user holds only the caller: silent under the greeting');
  const callerOnly = userVoiced.filter((f) => !agentVoiced.includes(f));
  t.ok(callerOnly.length > 20, 'agent holds only the agent: silent under (most of) the caller\'s speech');
  // The agent answered the keyed digits while the caller still talked (the caller went on until it had heard
  // a second of the answer): both tracks keep that overlap.
  const overlap = userVoiced.filter((f) => agentVoiced.includes(f));
  t.ok(overlap.length > 5, `overlapping speech is kept on both tracks (${overlap.length} frames where both speak)`);
  let mixed = true;
  for (let i = 0; i < combined.length; i++) {
    const s = Math.max(-32768, Math.min(32767, (user[i] ?? 0) + (agent[i] ?? 0)));
    if (combined[i] !== s) {
      mixed = false;
      break;
    }
  }
  t.ok(mixed, 'combined is both parties mixed, sample for sample');

  const red = await get(piiKey, 'redacted=true');
  t.equal(red.status, 200);
  t.equal(red.headers.get('x-audio-redacted'), 'true');
  const spans = JSON.parse(red.headers.get('x-audio-redactions') ?? '[]');
  t.same(spans.map((s: any) => [s.kind, s.source]), [['card_number', 'dtmf']], 'one span muted: the keyed card number (kind and offsets, never the value)');
  t.notOk(JSON.stringify(spans).includes(CARD), 'the value is not listed');
  t.same(spans, listed, 'the same spans as the row lists');
  const redacted = samplesOf(t, red.bytes, 'redacted');
  const spanFrames = userVoiced.filter((f) => inSpans(f * 160, spans));
  t.ok(spanFrames.length > 5, `the caller was speaking while keying: raw has sound over the card number's span (${spanFrames.length} voiced frames)`);
  let silentInSpan = true;
  let equalElsewhere = true;
  for (let i = 0; i < combined.length; i++) {
    if (inSpans(i, spans)) silentInSpan &&= redacted[i] === 0;
    else equalElsewhere &&= redacted[i] === combined[i];
  }
  t.ok(silentInSpan, 'redacted: silent over the card number\'s span');
  t.ok(equalElsewhere, 'redacted: equal to the raw recording elsewhere');
  const redUser = samplesOf(t, (await get(piiKey, 'direction=user&redacted=true')).bytes, 'redacted user');
  t.ok(redUser.every((s, i) => (inSpans(i, spans) ? s === 0 : s === user[i])), 'redacted user: muted over the span in the caller\'s direction too');

  const noPii = await get(dataKey, 'redacted=false');
  t.equal(noPii.status, 200);
  t.ok(noPii.bytes.equals(red.bytes), 'a key without pii gets the redacted bytes even when asking redacted=false');
  t.equal(noPii.headers.get('x-audio-redacted'), 'true');
  const noPiiUser = await get(dataKey, 'direction=user');
  t.ok(noPiiUser.bytes.equals((await get(piiKey, 'direction=user&redacted=true')).bytes), 'and per direction too');

  // Range: a browser seeking.
  const size = raw.combined.bytes.length;
  t.equal(raw.combined.headers.get('accept-ranges'), 'bytes');
  t.equal(Number(raw.combined.headers.get('content-length')), size);
  const head = await get(piiKey, '', { range: 'bytes=0-43' });
  t.equal(head.status, 206);
  t.equal(head.headers.get('content-range'), `bytes 0-43/${size}`);
  t.ok(head.bytes.equals(raw.combined.bytes.subarray(0, 44)), 'the header bytes');
  const from = await get(piiKey, '', { range: 'bytes=1000-' });
  t.equal(from.status, 206);
  t.equal(from.headers.get('content-range'), `bytes 1000-${size - 1}/${size}`);
  t.ok(from.bytes.equals(raw.combined.bytes.subarray(1000)), 'an open range: the rest');
  const tail = await get(piiKey, '', { range: 'bytes=-100' });
  t.ok(tail.status === 206 && tail.bytes.equals(raw.combined.bytes.subarray(size - 100)), 'a suffix range: the last bytes');
  const past = await get(piiKey, '', { range: `bytes=${size}-` });
  t.equal(past.status, 416, 'a range past the end: 416');
  t.equal(past.headers.get('content-range'), `bytes */${size}`);
  t.match(JSON.parse(past.bytes.toString()), { error_message: /range not satisfiable/ });
  const backwards = await get(piiKey, '', { range: 'bytes=100-50' });
  t.ok(backwards.status === 200 && backwards.bytes.equals(raw.combined.bytes), 'an invalid range (its end before its start) is ignored: the whole file');
  // No validator is ever sent (no ETag, no Last-Modified), so no If-Range can match: the whole file (RFC 9110, 13.1.5).
  for (const validator of ['"foo"', 'Sat, 05 Dec 2026 10:00:00 GMT']) {
    const conditional = await get(piiKey, '', { range: 'bytes=0-10', 'if-range': validator });
    t.ok(conditional.status === 200 && conditional.bytes.equals(raw.combined.bytes), `If-Range ${validator}: the whole file, not the range`);
  }

  // Parameters and not-found, in the family's error shape.
  const bad = await get(piiKey, 'direction=both');
  t.equal(bad.status, 400);
  t.match(JSON.parse(bad.bytes.toString()), { error_message: /direction must be one of combined, user, agent/ });
  t.equal((await get(piiKey, 'redacted=maybe')).status, 400);
  const unknown = await audio(p, project, piiKey, 'no-such-conversation');
  t.equal(unknown.status, 404);
  t.match(JSON.parse(unknown.bytes.toString()), { error_message: /not found/ });

  // Any direction and redacted value: a WAV or a 400 in the family's shape, never a 500.
  await fc.assert(
    fc.asyncProperty(fc.option(fc.oneof(fc.constantFrom('combined', 'user', 'agent', 'true', 'false', '1', '0'), fc.string())), fc.option(fc.oneof(fc.constantFrom('true', 'false', '1', '0'), fc.string())), async (direction, redacted) => {
      const qs = new URLSearchParams();
      if (direction !== null) qs.set('direction', direction);
      if (redacted !== null) qs.set('redacted', redacted);
      const r = await get(dataKey, qs.toString());
      if (r.status === 200) return r.bytes.subarray(0, 4).toString() === 'RIFF' && r.headers.get('x-audio-redacted') === 'true';
      return r.status === 400 && typeof JSON.parse(r.bytes.toString()).error_message === 'string';
    }),
    { numRuns: 40 },
  );

  // A text conversation has no audio: 404.
  const chat = await project.chat('create', {});
  t.equal(chat.status, 200);
  // Its record is a projection: once it is there, the endpoint knows the conversation and says it has no audio.
  await waitForProjections(p);
  const none = await audio(p, project, piiKey, chat.body.conversation_id);
  t.equal(none.status, 404, 'a chat conversation: 404');
  t.match(JSON.parse(none.bytes.toString()), { error_message: /has no audio/ });

  // Tenant isolation: another project's key, and another project's path.
  const other = await chatProject(p, { name: 'Other Co' });
  const otherKey = await conversationsKey(p, other, ['conversations_data', 'pii']);
  t.equal((await audio(p, project, otherKey, c.id)).status, 403, 'a key of another project: 403 on this project\'s path');
  t.equal((await audio(p, other, otherKey, c.id)).status, 404, 'this conversation under another project: 404');
  t.equal((await audio(p, project, 'sk_nope', c.id)).status, 401, 'an unknown key: 401');
  // A recording is conversation data (contract 5, rule 5).
  const noData = await audio(p, project, await conversationsKey(p, project, ['pii']), c.id);
  t.equal(noData.status, 403, 'a key without conversations_data: 403, even with pii');
  t.match(JSON.parse(noData.bytes.toString()), { error_message: /conversations_data/ });
});

t.test('a call the agent ends with conv.end() after its goodbye: a key without pii gets the whole recording, muted only over the spans', needsTools(), async (t) => {
  const number = '+442079460152';
  // conv.end() ends the conversation when the 9's turn is answered, before the goodbye is spoken and the call
  // hung up: the recording goes on for the goodbye's seconds after that. The agent reads the card number back:
  // its answer is personal data too, muted where it was spoken.
  const { project, caller, run } = await cardLineCall(t, {
    name: 'End Co',
    number,
    scenario: 'recording-agent-end.xml',
    turn: 'function turn(conv, message) { if (message === "9") { conv.end(); return "Thank you, your card is checked and your payment is on its way. Thank you for calling Acme payments today, and goodbye."; } return "Thank you. I have your card as " + message.split("").join(" ") + ". Press nine when you are done."; }',
  });
  // The card number keyed (300 ms apart), and its answer, whole.
  for (const d of CARD) {
    caller.key(d);
    await caller.frames(15);
  }
  const beforeAnswer = caller.heard.voiced;
  await caller.until(() => caller.heard.voiced > beforeAnswer + 20 && caller.heard.quiet >= 50);
  const beforeGoodbye = caller.heard.voiced;
  caller.key('9');
  await caller.frames(10);
  caller.key('#');
  // While the goodbye is spoken the conversation has ended and the call goes on: a key without pii asking then
  // gets the redacted recording as it stands, rendered for that answer only (had it been kept, the redacted
  // recording read after the hang-up, below, would stop short of the raw one).
  await caller.until(() => caller.heard.voiced >= beforeGoodbye + 25);
  const dataKey = await conversationsKey(p, project, ['conversations_data']);
  const piiKey = await conversationsKey(p, project, ['conversations_data', 'pii']);
  const read = conversationsClient(p, project, piiKey);
  const c = await eventually(async () => ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((x: any) => x.in_progress === false) ?? null, 30_000);
  const early = await audio(p, project, dataKey, c.id);
  t.equal(early.status, 200, 'once the conversation has ended, a key without pii gets audio');
  t.equal(early.headers.get('x-audio-redacted'), 'true', 'redacted');
  samplesOf(t, early.bytes, 'redacted before the hang-up');
  const done = await run;
  caller.close();
  t.equal(done.code, 0, 'sipp completed the call: the agent hung up after its goodbye', { out: done.out.slice(-3000) });

  // The recordings projector renders the call once its recording is complete.
  const listed = await eventually(async () => ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((x: any) => x.id === c.id && x.audio?.redactions)?.audio.redactions ?? null, 30_000);
  t.same(listed.map((s: any) => [s.kind, s.source]), [['card_number', 'dtmf'], ['card_number', 'agent']], 'the row lists what was muted: the keyed card number, then the agent reading it back');
  const readBack = listed[1];
  t.ok(readBack.start_ms >= listed[0].start_ms && readBack.end_ms - readBack.start_ms > 2000, `the read-back's span is the answer, seconds long (${readBack.start_ms} to ${readBack.end_ms} ms)`);
  const masked = (await conversationsClient(p, project, dataKey)({ channel: 'VOICE-SIP' })).body.conversations.find((x: any) => x.id === c.id);
  t.ok(masked.turns.some((x: any) => x.agent_response === '[redacted]'), 'a key without pii reads the read-back answer masked');
  t.notOk(JSON.stringify(masked.turns).includes('4 1 1 1'), 'nowhere in its turns');
  const get = (key: string, q = '') => audio(p, project, key, c.id, q);
  for (const direction of ['combined', 'user', 'agent']) {
    const raw = await get(piiKey, `direction=${direction}`);
    const red = await get(dataKey, `direction=${direction}`);
    t.equal(raw.headers.get('x-audio-redacted'), 'false');
    t.equal(red.headers.get('x-audio-redacted'), 'true', `${direction}: a key without pii gets the redacted rendering`);
    const spans = JSON.parse(red.headers.get('x-audio-redactions') ?? '[]');
    t.same(spans, listed, `${direction}: the spans the row lists`);
    const rawSamples = samplesOf(t, raw.bytes, `raw ${direction}`);
    const redSamples = samplesOf(t, red.bytes, `redacted ${direction}`);
    t.equal(redSamples.length, rawSamples.length, `${direction}: the redacted recording is as long as the raw one, the goodbye's end included (${(redSamples.length / RATE).toFixed(2)} s of ${(rawSamples.length / RATE).toFixed(2)} s)`);
    let silentInSpan = true;
    let equalElsewhere = true;
    for (let i = 0; i < Math.max(rawSamples.length, redSamples.length); i++) {
      if (inSpans(i, spans)) silentInSpan &&= redSamples[i] === 0;
      else equalElsewhere &&= redSamples[i] === rawSamples[i];
    }
    t.ok(silentInSpan, `${direction}: silent over the card number's span`);
    t.ok(equalElsewhere, `${direction}: equal to the raw recording everywhere else`);
    if (direction === 'agent') {
      const voiced = voicedFrames(rawSamples);
      t.ok(voiced.length > 0 && !inSpans(voiced[voiced.length - 1] * 160, spans), 'the goodbye\'s last words are in the raw agent track, outside the span');
      const inReadBack = voiced.filter((f) => inSpans(f * 160, [readBack]));
      t.ok(inReadBack.length > 50, `the raw agent track has the read-back where its span is (${inReadBack.length} voiced frames), muted in the redacted one`);
    }
  }
});

t.test('a gateway killed mid-call leaves a playable recording up to the crash, completed and rendered once its conversation ends idle', needsTools(), async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-rec-crash-'));
  const token = `test-operator-crash-${Math.random().toString(36).slice(2)}`;
  // The conversation ends idle 15 s after its last turn (the greeting's), once nothing feeds it.
  let q = await startPlatform({ dataDir, env: { ...MEDIA_ENV, OPERATOR_TOKEN: token, VOICE_NO_INPUT_MS: '20000', CONVERSATION_IDLE_MS: '15000' } });
  t.teardown(async () => {
    await q.stop();
    removeDir(dataDir);
  });
  const number = '+442079460151';
  const project = await chatProject(q, { name: 'Crash Co', functions: { start: 'function start(conv) { conv.say("Hello, you are through to Acme. Please hold the line while I look that up for you, it will take a moment."); }' } });
  const sippPort = await quietPort();
  await bindNumber(project.api, project.agentId, number, { host: '127.0.0.2', port: sippPort });
  const key = await conversationsKey(q, project, ['conversations_data', 'pii']);
  const sink = await audioSink();
  t.teardown(() => sink.close());
  const speech = join(dir, 'crash-speech.pcap');
  rtpPcap(speak('hello', dir), speech);
  const file = scenario('recording-card.xml', dir, { NUMBER: number, AUDIO_IP: '127.0.0.2', AUDIO_PORT: sink.port, GREETING_MS: 20000, SPEECH_PCAP: speech, END_MS: 100 });
  const run = runSipp({ scenario: file, target: `127.0.0.1:${mediaPorts(q.stdout()).sip}`, port: sippPort, mediaPort: await quietPort(), dir, timeoutS: 40 });
  const read = conversationsClient(q, project, key);
  const c = await eventually(async () => ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? [])[0] ?? null, 30_000);
  // Wait until the greeting has been recorded for a few chunks, then SIGKILL the whole process mid-call.
  await eventually(async () => {
    const r = await audio(q, project, key, c.id, 'direction=agent');
    return r.status === 200 && r.bytes.length > 44 + 3 * 16000 ? true : null;
  }, 30_000);
  q.child.kill('SIGKILL');
  await new Promise((r) => q.child.once('exit', r));
  if (run.pid) process.kill(run.pid, 'SIGTERM');
  await run;
  q = await startPlatform({ dataDir, env: { ...MEDIA_ENV, OPERATOR_TOKEN: token } });
  const after = await audio(q, project, key, c.id, 'direction=agent');
  t.equal(after.status, 200, 'the recording is there after the crash');
  const s = samplesOf(t, after.bytes, 'after the crash');
  t.ok(s.length >= 3 * RATE, `it holds the call up to the crash (${(s.length / RATE).toFixed(1)} s)`);
  t.ok(voicedFrames(s).length > 20, 'with the agent\'s speech in it');
  const combined = await audio(q, project, key, c.id);
  samplesOf(t, combined.bytes, 'combined after the crash');

  // Nothing feeds the conversation any more: it ends idle, and the recording is completed as it was written up
  // to the crash and rendered once, as any other (its row lists the redactions: none here).
  const readAgain = conversationsClient(q, project, key);
  const row = await eventually(async () => ((await readAgain({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((x: any) => x.id === c.id && !x.in_progress && x.audio?.redactions) ?? null, 60_000);
  t.same(row.audio.redactions, [], 'the row lists the redacted rendering\'s spans: none');
  const red = await audio(q, project, key, c.id, 'redacted=true');
  t.equal(red.status, 200);
  t.equal(red.headers.get('x-audio-redacted'), 'true');
  t.same(samplesOf(t, red.bytes, 'redacted after the crash'), samplesOf(t, (await audio(q, project, key, c.id)).bytes, 'combined once ended'), 'the redacted rendering: the whole recording, nothing muted');
});
