/**
 * The OpenAI-compatible speech adapters (TTS_BASE_URL → POST /audio/speech, STT_BASE_URL → POST
 * /audio/transcriptions) on a real inbound call from sipp. No model server can run here, so the far side is
 * a stand-in on loopback: it checks each request's shape (model, input, voice, bearer key; a multipart WAV
 * file; `STT_LANGUAGE`'s language) and answers a WAV spoken by espeak-ng, or a fixed transcript. The call's ASR
 * language is `STT_LANGUAGE`, as the Concurrent Calls `language` filter sees it.
 */
import t from 'tap';
import dgram from 'node:dgram';
import { createServer, type IncomingMessage } from 'node:http';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import alawmulaw from 'alawmulaw';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';
import { chatProject } from './helpers/chat.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { bindNumber, MEDIA_ENV, mediaPorts, rtpPcap, runSipp, scenario, SIPP_PCAPS, speak, quietPort } from './helpers/voice.js';
import { toolAvailable } from './helpers/tools.js';

const tools = () => toolAvailable('/usr/bin/sipp', 'sip-tester') && toolAvailable('/usr/bin/espeak-ng', 'espeak-ng');
/** A fresh options object per test: tap writes a filtered-out test's skip onto the object it is given. */
const needsTools = () => (tools() ? {} : { skip: 'sipp or espeak-ng is not installed' });
const TRANSCRIPT = 'what are your opening hours';

const body = (rq: IncomingMessage) => new Promise<Buffer>((r) => { const c: Buffer[] = []; rq.on('data', (d) => c.push(d)); rq.on('end', () => r(Buffer.concat(c))); });

/** The stand-in model server: what it was asked, and its address. */
async function standIn(dir: string) {
  const seen = { speech: [] as any[], transcriptions: [] as Array<{ model: unknown; language: unknown; file: { type: string; name: string; riff: boolean; bytes: number } | null; auth: unknown }>, bad: [] as string[] };
  const server = createServer(async (rq, rs) => {
    const raw = await body(rq);
    try {
      if (rq.method === 'POST' && rq.url === '/v1/audio/speech') {
        const j = JSON.parse(raw.toString());
        seen.speech.push({ ...j, auth: rq.headers.authorization });
        if (j.model !== 'stand-in-tts' || typeof j.input !== 'string' || !j.input || j.voice !== 'nova' || rq.headers.authorization !== 'Bearer tts-key') throw new Error(`speech request: ${raw}`);
        const wav = join(dir, `tts-${seen.speech.length}.wav`);
        const e = spawnSync('espeak-ng', ['-v', 'en-us', '-w', wav, j.input]);
        if (e.status !== 0) throw new Error(`espeak-ng: ${e.stderr}`);
        rs.writeHead(200, { 'content-type': 'audio/wav' }).end(readFileSync(wav));
        return;
      }
      if (rq.method === 'POST' && rq.url === '/v1/audio/transcriptions') {
        const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': String(rq.headers['content-type']) } }).formData();
        const file = form.get('file');
        const f = file instanceof Blob ? Buffer.from(await file.arrayBuffer()) : null;
        seen.transcriptions.push({ model: form.get('model'), language: form.get('language'), file: f ? { type: (file as Blob).type, name: (file as File).name, riff: f.subarray(0, 4).toString() === 'RIFF' && f.subarray(8, 12).toString() === 'WAVE', bytes: f.length } : null, auth: rq.headers.authorization });
        if (form.get('model') !== 'stand-in-stt' || !f || rq.headers.authorization !== 'Bearer stt-key') throw new Error('transcription request');
        rs.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text: ` ${TRANSCRIPT} ` }));
        return;
      }
      throw new Error(`unexpected ${rq.method} ${rq.url}`);
    } catch (err) {
      seen.bad.push(String(err));
      rs.writeHead(400).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return { seen, url: `http://127.0.0.1:${port}/v1`, close: () => new Promise((r) => server.close(r)) };
}

t.test('an inbound call with both adapters set: the stand-in transcript is the turn, its speech reaches sipp', needsTools(), async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-voice-adapters-'));
  const model = await standIn(dir);
  const p: Platform = await startPlatform({
    env: { ...MEDIA_ENV, VOICE_NO_INPUT_MS: '60000', VOICE_END_SILENCE_MS: '600', TTS_BASE_URL: model.url, TTS_API_KEY: 'tts-key', TTS_MODEL: 'stand-in-tts', TTS_VOICE: 'nova', STT_BASE_URL: model.url, STT_API_KEY: 'stt-key', STT_MODEL: 'stand-in-stt', STT_LANGUAGE: 'en-GB' },
  });
  t.teardown(async () => {
    await p.stop();
    removeDir(p.dataDir);
    await model.close();
    if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
  });
  const sip = mediaPorts(p.stdout()).sip;
  const project = await chatProject(p, { name: 'Adapter Co', topics: [['Opening hours', 'We are open from 9am to 5pm, Monday to Friday.']], functions: { start: 'function start(conv) { conv.say("Hello, you are through to Acme."); }' } });
  const sippPort = await quietPort();
  const number = '+442079460150';
  await bindNumber(project.api, project.agentId, number, { host: '127.0.0.2', port: sippPort });

  const sink = dgram.createSocket('udp4');
  await new Promise<void>((r) => sink.bind(0, '127.0.0.2', () => r()));
  t.teardown(() => sink.close());
  let voiced = 0;
  sink.on('message', (m) => {
    const pcm = alawmulaw.mulaw.decode(m.subarray(12));
    let sum = 0;
    for (const s of pcm) sum += s * s;
    if (Math.sqrt(sum / pcm.length) > 300) voiced++;
  });
  const question = join(dir, 'question.pcap');
  rtpPcap(speak('what are your opening hours', dir), question);
  const file = scenario('inbound-call.xml', dir, { NUMBER: number, AUDIO_IP: '127.0.0.2', AUDIO_PORT: sink.address().port, GREETING_MS: 3000, SPEECH_PCAP: question, ANSWER_MS: 5000, DIGIT_1: join(SIPP_PCAPS, 'dtmf_2833_4.pcap'), DIGIT_2: join(SIPP_PCAPS, 'dtmf_2833_2.pcap'), END_MS: 3000 });
  const run = await runSipp({ scenario: file, target: `127.0.0.1:${sip}`, port: sippPort, mediaPort: await quietPort(), dir });
  t.equal(run.code, 0, 'sipp completed the call', { out: run.out.slice(-3000) });

  t.same(model.seen.bad, [], 'every request to the stand-in had the expected shape');
  t.ok(model.seen.speech.some((s) => /Acme/.test(s.input)), 'the greeting was spoken through /audio/speech');
  t.ok(model.seen.speech.some((s) => /9am to 5pm/.test(s.input)), 'and the answer');
  t.ok(model.seen.speech.every((s) => s.response_format === 'wav'), 'asking for WAV');
  t.ok(model.seen.transcriptions.length >= 1, 'the caller utterance went to /audio/transcriptions');
  t.ok(model.seen.transcriptions.every((x) => x.file?.riff && x.file.type === 'audio/wav' && x.file.bytes > 44), 'as a multipart WAV file');
  t.ok(model.seen.transcriptions.every((x) => x.language === 'en'), `with STT_LANGUAGE's language, without its region (${model.seen.transcriptions.map((x) => x.language)})`);
  t.ok(voiced > 20, `the stand-in's speech reached sipp as RTP (${voiced} voiced packets)`);

  const read = conversationsClient(p, project, await conversationsKey(p, project));
  let c: any = null;
  for (let i = 0; i < 100 && !c; i++) {
    c = ((await read({ channel: 'VOICE-SIP' })).body.conversations ?? []).find((x: any) => x.in_progress === false) ?? null;
    if (!c) await new Promise((r) => setTimeout(r, 200));
  }
  t.ok(c, 'the call has an ended VOICE-SIP conversation');
  const spoken = c.turns.find((x: any) => x.user_input !== '');
  t.equal(spoken?.user_input, TRANSCRIPT, "the turn holds the stand-in's transcript (trimmed)");
  t.match(spoken?.agent_response, /9am to 5pm/, 'answered from the topic');
  t.equal(c.turns.find((x: any) => x.user_input_dtmf !== '')?.user_input_dtmf, '42', 'digits still work alongside');

  // STT_LANGUAGE is the call's ASR language: the Concurrent Calls `language` filter counts it as that.
  const at = Date.parse(c.started_at);
  const peak = async (language: string) => {
    const r = await read({ start_time: new Date(at - 60_000).toISOString(), end_time: new Date(at + 60_000).toISOString(), language }, { version: 'v1', path: '/concurrency' });
    t.equal(r.status, 200, 'answered', { body: r.text });
    return Math.max(0, ...(r.body.intervals ?? []).map((i: any) => i.max_concurrent_conversations));
  };
  t.equal(await peak('en-GB'), 1, 'counted as British English');
  t.equal(await peak('en-US'), 0, 'not as US English');
});
