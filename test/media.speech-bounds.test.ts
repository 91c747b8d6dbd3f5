/**
 * The bounds on what a call's text to speech holds and makes (docs/voice.md, "Long answers"): the synthesis
 * cache, bounded by bytes as well as entries, keeps no large piece; an answer is cut to what a call speaks and
 * into pieces; one synthesis's WAV is read up to its bound (espeak-ng's output, a speech service's answer). The calls themselves: test/voice.long-speech.test.ts.
 */
import t from 'tap';
import { createServer } from 'node:http';
import { SpeechCache, TTS_CACHE_BYTES, TTS_CACHE_ENTRIES, TTS_CACHE_PIECE_MAX_BYTES } from '../gateway/media/speech/cache.js';
import { espeakTts, run } from '../gateway/media/speech/espeak.js';
import { openAiTts, wavOf } from '../gateway/media/speech/openai.js';
import { SPEECH_PIECE_CHARS, SPOKEN_ANSWER_MAX_CHARS, SYNTHESIS_MAX_WAV_BYTES, spokenPieces } from '../gateway/media/speech/pieces.js';
import { toolAvailable } from './helpers/tools.js';

const needsEspeak = () => (toolAvailable('/usr/bin/espeak-ng', 'espeak-ng') ? {} : { skip: 'espeak-ng is not installed' });

/** `bytes` of samples, made once per call of the maker it returns (counted in `made`). */
const maker = (bytes: number) => {
  const made = { n: 0 };
  return { made, make: () => async () => (made.n++, new Int16Array(bytes / 2)) };
};

t.test('the cache holds no more bytes than TTS_CACHE_BYTES, however many texts are spoken', async (t) => {
  const cache = new SpeechCache();
  const piece = 768 * 1024;
  const m = maker(piece);
  // Fewer texts than the entry bound, each under the piece bound: only the byte bound can hold them back.
  const texts = Math.ceil((2 * TTS_CACHE_BYTES) / piece);
  t.ok(texts < TTS_CACHE_ENTRIES && piece <= TTS_CACHE_PIECE_MAX_BYTES);
  for (let i = 0; i < texts; i++) await cache.get(`text ${i}`, m.make());
  t.ok(cache.size.bytes <= TTS_CACHE_BYTES, `${cache.size.bytes} bytes kept, at most ${TTS_CACHE_BYTES}`);
  t.ok(cache.size.entries < texts, `older texts let go (${cache.size.entries} of ${texts} kept)`);
  const before = m.made.n;
  await cache.get(`text ${texts - 1}`, m.make());
  t.equal(m.made.n, before, 'the latest text is still kept');
  await cache.get('text 0', m.make());
  t.equal(m.made.n, before + 1, 'the oldest was let go: made again');
});

t.test('a piece larger than TTS_CACHE_PIECE_MAX_BYTES is not kept', async (t) => {
  const cache = new SpeechCache();
  const m = maker(TTS_CACHE_PIECE_MAX_BYTES + 2);
  await cache.get('long', m.make());
  t.same(cache.size, { entries: 0, bytes: 0 }, 'nothing kept');
  await cache.get('long', m.make());
  t.equal(m.made.n, 2, 'made again when spoken again');
  const small = maker(1000);
  await cache.get('short', small.make());
  await cache.get('short', small.make());
  t.equal(small.made.n, 1, 'a small piece is made once');
});

t.test('espeak-ng through its cache: distinct texts spoken stay within a byte bound', needsEspeak(), async (t) => {
  // Each text makes about 80 KB of samples: two or three are kept.
  const cache = new SpeechCache({ entries: 256, bytes: 200_000, pieceBytes: 150_000 });
  const tts = espeakTts('espeak-ng', cache);
  for (let i = 0; i < 8; i++) {
    const pcm = await tts.synthesize(`Your reference number is ${i}${i}${i}. Thank you for calling.`, { voice: '', rate: 150 });
    t.ok(pcm.length > 8000, `text ${i} spoken`);
    t.ok(cache.size.bytes <= 200_000, `${cache.size.bytes} bytes kept after text ${i}`);
  }
  t.ok(cache.size.entries > 0 && cache.size.entries < 8, `older texts let go (${cache.size.entries} kept)`);
});

t.test('an answer is cut to SPOKEN_ANSWER_MAX_CHARS at a sentence end, in pieces of at most SPEECH_PIECE_CHARS', async (t) => {
  const sentence = 'This is one sentence of a long reading, and it goes on for a while. ';
  const text = sentence.repeat(1000);
  const r = spokenPieces(text);
  t.ok(r.truncated, 'truncated');
  t.ok(r.spokenChars <= SPOKEN_ANSWER_MAX_CHARS && r.spokenChars > SPOKEN_ANSWER_MAX_CHARS / 2, `${r.spokenChars} characters spoken`);
  t.ok(r.pieces.every((p) => p.length <= SPEECH_PIECE_CHARS && p.endsWith('.')), 'each piece a run of whole sentences within the bound');
  t.equal(r.pieces.join(' '), text.slice(0, r.spokenChars).trim(), 'the pieces are the spoken part, in order');
  t.same(spokenPieces('Hello, you are through to Acme. How can I help?'), { pieces: ['Hello, you are through to Acme. How can I help?'], spokenChars: 47, truncated: false }, 'a short answer is one piece, as it was');
  const unbroken = spokenPieces('9'.repeat(10 * SPEECH_PIECE_CHARS));
  t.ok(unbroken.pieces.every((p) => p.length <= SPEECH_PIECE_CHARS), 'text with no break is cut at the bound');
  t.ok(spokenPieces('\u{1F600}'.repeat(SPEECH_PIECE_CHARS)).pieces.every((p) => !/[\uD800-\uDBFF]$/.test(p)), 'never between the halves of a surrogate pair');
});

t.test("a synthesis's output is read up to its bound: the program is stopped there", needsEspeak(), async (t) => {
  const out = await run('espeak-ng', ['--stdout', '--stdin'], Buffer.from('A long text to read out. '.repeat(200)), 50_000);
  t.equal(out.length, 50_000, 'cut at the bound');
  t.equal(out.toString('ascii', 0, 4), 'RIFF', 'a WAV, cut');
});

t.test("a speech service's WAV is read up to SYNTHESIS_MAX_WAV_BYTES, however much it answers", async (t) => {
  // 24 MiB of WAV at 8 kHz (no resampling): the samples made are those of the bound's bytes.
  const pcm = new Int16Array(12 * 1024 * 1024).fill(1000);
  const wav = wavOf(pcm);
  const server = createServer((rq, rs) => {
    rq.resume();
    rq.on('end', () => rs.writeHead(200, { 'content-type': 'audio/wav' }).end(wav));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise((r) => server.close(r)));
  const tts = openAiTts({ baseUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`, model: 'm' });
  const out = await tts.synthesize('Hello.', { voice: '', rate: 150 });
  t.equal(out.length, Math.floor((SYNTHESIS_MAX_WAV_BYTES - 44) / 2), 'the samples of the bound, not of the whole answer');
});
