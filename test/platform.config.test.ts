/**
 * The environment as `platform/config.ts` reads it: a value the platform cannot use as given stops the start,
 * exit 1, with `invalid configuration: <VARIABLE>: ...` (docs/configuration.md), rather than being taken for
 * something else or left to fail later.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import fc from 'fast-check';
import { integer, loadConfig, type Config } from '../platform/config.js';
import { MAIN } from './helpers/platform.js';
import { createEmbedderFromEnv } from '../actors/conversation/mod.js';
import { speechFromEnv } from '../gateway/media/speech/from-env.js';
import { PLATFORMS } from '../gateway/socket/sessions.js';
import { attributesBytes } from '../machines/conversation.js';

/** Runs the platform's entry with `env` added; a configuration refused stops it before it opens anything. */
function startWith(env: Record<string, string>) {
  return spawnSync(process.execPath, [MAIN], { env: { ...process.env, DATA_DIR: '/nonexistent-sb-config', ...env }, encoding: 'utf8', timeout: 60_000 });
}

t.test('OPERATOR_TOKEN: visible ASCII only, what `Authorization: Bearer <token>` can carry', async (t) => {
  for (const token of ['op', 'sbo_0123456789abcdef', 'a!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~z', 'dGVzdA==']) {
    t.equal(loadConfig({ OPERATOR_TOKEN: token }).operatorToken, token, JSON.stringify(token));
  }
  for (const token of ['correct horse battery staple', ' ', '   ', ' leading', 'trailing ', 'tab\there', 'new\nline', 'nul\0', 'caf\u00e9', 'del\u007f']) {
    t.throws(() => loadConfig({ OPERATOR_TOKEN: token }), { message: /^invalid configuration: OPERATOR_TOKEN: OPERATOR_TOKEN must be visible ASCII/ }, JSON.stringify(token));
  }
});

t.test('an OPERATOR_TOKEN with a space stops the start: exit 1, naming it', async (t) => {
  const r = startWith({ OPERATOR_TOKEN: 'correct horse battery staple 42' });
  t.equal(r.status, 1);
  t.match(r.stderr, /switchboard failed to start: .*invalid configuration: OPERATOR_TOKEN: /);
  t.notMatch(r.stdout, /serving:/);
});

t.test('LLM_BASE_URL: an http or https URL, blank as unset (as the responder reads it); LLM_TIMEOUT_MS: 100 to 600000', async (t) => {
  for (const url of ['http://127.0.0.1:9000/v1', 'https://api.openai.com/v1', '  https://api.openai.com/v1  ', '   ']) {
    t.doesNotThrow(() => loadConfig({ LLM_BASE_URL: url }), JSON.stringify(url));
  }
  for (const url of ['not-a-url', 'api.openai.com/v1', 'ftp://example.com/v1', 'file:///etc/passwd', 'http://', 'https//api.openai.com']) {
    t.throws(() => loadConfig({ LLM_BASE_URL: url }), { message: /^invalid configuration: LLM_BASE_URL: LLM_BASE_URL must be an http or https URL/ }, JSON.stringify(url));
  }
  t.notMatch(String((() => { try { loadConfig({ LLM_BASE_URL: 'sk-secret-not-a-url' }); } catch (e) { return e; } })()), /sk-secret/, 'the value is not shown');
  for (const ms of ['100', '30000', '600000']) t.doesNotThrow(() => loadConfig({ LLM_BASE_URL: 'http://127.0.0.1:9000', LLM_TIMEOUT_MS: ms }), ms);
  for (const ms of ['abc', '0', '99', '600001', '-5', '1500.5']) {
    t.throws(() => loadConfig({ LLM_TIMEOUT_MS: ms }), { message: /^invalid configuration: LLM_TIMEOUT_MS: / }, ms);
  }
});

t.test('the LLM_* settings, read once: what the responder is made with and what turnWaitMs counts on', async (t) => {
  t.same(loadConfig({}).llm, { baseUrl: undefined, apiKey: undefined, model: 'gpt-4o-mini', timeoutMs: undefined });
  t.same(loadConfig({ LLM_BASE_URL: '   ', LLM_API_KEY: '  ', LLM_MODEL: ' ' }).llm, { baseUrl: undefined, apiKey: undefined, model: 'gpt-4o-mini', timeoutMs: undefined }, 'blank is unset');
  t.same(
    loadConfig({ LLM_BASE_URL: ' https://api.example.com/v1 ', LLM_API_KEY: ' k1 ', LLM_MODEL: ' m2 ', LLM_TIMEOUT_MS: '8000' }).llm,
    { baseUrl: 'https://api.example.com/v1', apiKey: 'k1', model: 'm2', timeoutMs: 8000 },
    'trimmed',
  );
  const base = { ASK_TIMEOUT_MS: '2500', FUNCTION_TIMEOUT_MS: '100' };
  // Three hooks at the functions' wall-clock bound (4 x 100 ms); with a model, two replies of 6 requests and 5 tool calls.
  t.equal(loadConfig(base).turnWaitMs, 2500 + 3 * 400, 'offline: the ask timeout and three hooks');
  t.equal(loadConfig({ ...base, LLM_BASE_URL: 'http://127.0.0.1:9000' }).turnWaitMs, 2500 + 2 * (6 * 30_000 + 5 * 400) + 3 * 400, 'a model: its default time limit');
  t.equal(loadConfig({ ...base, LLM_BASE_URL: 'http://127.0.0.1:9000', LLM_TIMEOUT_MS: '8000' }).turnWaitMs, 2500 + 2 * (6 * 8000 + 5 * 400) + 3 * 400, 'a model: LLM_TIMEOUT_MS');
  t.equal(loadConfig({ ...base, LLM_BASE_URL: '  ', LLM_TIMEOUT_MS: '8000' }).turnWaitMs, 2500 + 3 * 400, 'blank LLM_BASE_URL: no model to wait for');
});

t.test('LLM_BASE_URL=not-a-url and LLM_TIMEOUT_MS=abc stop the start: exit 1, naming both', async (t) => {
  const r = startWith({ LLM_BASE_URL: 'not-a-url', LLM_TIMEOUT_MS: 'abc' });
  t.equal(r.status, 1);
  t.match(r.stderr, /switchboard failed to start: .*invalid configuration: .*LLM_BASE_URL: /);
  t.match(r.stderr, /LLM_TIMEOUT_MS: /);
  t.notMatch(r.stdout, /serving:/);
});

t.test('MONGODB_URL, which chooses the MongoDB store: a mongodb:// or mongodb+srv:// connection string naming a host, the URL not shown', async (t) => {
  for (const url of ['mongodb://localhost:27017', 'mongodb://u:p%40ss@h1:27017,h2:27017/db?replicaSet=rs0', 'mongodb+srv://cluster0.example.net/db', 'mongodb://h/db?authSource=admin']) {
    t.equal(loadConfig({ MONGODB_URL: url }).mongodbUrl, url, url);
  }
  for (const url of ['garbage', '  ', 'localhost:27017', 'http://localhost:27017', 'MONGODB://h', 'mongodb:/h', 'mongodb://', 'mongodb:///db', 'mongodb://u:p@', 'mongodb://:27017', 'mongodb://user:s3cret@pass@h']) {
    t.throws(() => loadConfig({ MONGODB_URL: url }), { message: /^invalid configuration: MONGODB_URL: MONGODB_URL / }, JSON.stringify(url));
  }
  t.notMatch(String((() => { try { loadConfig({ MONGODB_URL: 'redis://user:s3cret@host' }); } catch (e) { return e; } })()), /s3cret/, 'the value is not shown');
});

t.test('MONGODB_URL that is not a MongoDB URL stops the start: exit 1, naming it, the password not shown', async (t) => {
  const r = startWith({ MONGODB_URL: 'postgres://admin:s3cret-pw@db.example.com:5432/app' });
  t.equal(r.status, 1);
  t.match(r.stderr, /switchboard failed to start: .*invalid configuration: MONGODB_URL: MONGODB_URL must be a mongodb:\/\/ or mongodb\+srv:\/\/ connection string/);
  t.notMatch(r.stderr, /s3cret-pw/, 'the password is not shown');
  t.notMatch(r.stdout, /serving:/);
});

t.test('EMBEDDINGS_BASE_URL, TTS_BASE_URL, STT_BASE_URL: an http or https URL, blank as unset (as their readers read them), the URL not shown', async (t) => {
  for (const name of ['EMBEDDINGS_BASE_URL', 'TTS_BASE_URL', 'STT_BASE_URL']) {
    for (const url of ['http://127.0.0.1:9000/v1', 'https://api.openai.com/v1', '  https://api.openai.com/v1  ', '   ']) {
      t.doesNotThrow(() => loadConfig({ [name]: url }), `${name}=${JSON.stringify(url)}`);
    }
    for (const url of ['not-a-url', 'api.openai.com/v1', 'ftp://example.com/v1', 'file:///etc/passwd', 'http://', 'https//api.openai.com']) {
      t.throws(() => loadConfig({ [name]: url }), { message: new RegExp(`^invalid configuration: ${name}: ${name} must be an http or https URL`) }, `${name}=${JSON.stringify(url)}`);
    }
    t.notMatch(String((() => { try { loadConfig({ [name]: 'sk-secret-not-a-url' }); } catch (e) { return e; } })()), /sk-secret/, `${name}: the value is not shown`);
  }
  // Blank, as the config takes it: unset for its reader too (a blank speech URL was the adapter's base).
  const blank = { EMBEDDINGS_BASE_URL: '   ', TTS_BASE_URL: '   ', STT_BASE_URL: '   ' };
  t.match(createEmbedderFromEnv(blank).model, /^offline-/, 'blank EMBEDDINGS_BASE_URL: the offline embedder');
  const speech = speechFromEnv(blank);
  t.same([speech.tts.name, speech.stt.name], ['espeak-ng', 'pocketsphinx'], 'blank TTS_BASE_URL and STT_BASE_URL: the engines on this machine');
});

t.test('STT_LANGUAGE: a BCP 47 tag, blank as unset; the transcription adapter expects it and calls carry it', async (t) => {
  for (const v of ['en-US', 'fr-FR', 'de', ' pt-BR ', 'zh-Hant-TW', '   ', 'es-419', 'en-US-x-a-b-c-d', 'sl-Latn-IT-rozaj-nedis-1996', 'x-private', 'i-klingon', 'und']) {
    t.doesNotThrow(() => loadConfig({ STT_LANGUAGE: v }), JSON.stringify(v));
  }
  for (const v of ['englishes-US', 'en_US', 'e', '12-US', 'en-', 'en US', 'en--US', 'en-toolongsubtag', `en${'-a'.repeat(40)}`]) {
    t.throws(() => loadConfig({ STT_LANGUAGE: v }), { message: /^invalid configuration: STT_LANGUAGE: STT_LANGUAGE must be a BCP 47 language tag/ }, JSON.stringify(v));
  }
  const url = 'http://127.0.0.1:9/v1';
  t.equal(speechFromEnv({ STT_BASE_URL: url, STT_LANGUAGE: ' fr-FR ' }).stt.language, 'fr-FR', 'the adapter takes it');
  t.equal(speechFromEnv({ STT_BASE_URL: url, STT_LANGUAGE: '  ' }).stt.language, '', 'blank: the service detects the language');
  t.equal(speechFromEnv({ STT_BASE_URL: url }).stt.language, '', 'unset: the same');
  t.equal(speechFromEnv({ STT_LANGUAGE: 'fr-FR' }).stt.language, 'en-US', 'without an adapter, pocketsphinx: US English whatever it says');
});

t.test('EMBEDDINGS_BASE_URL, TTS_BASE_URL and STT_BASE_URL that are not URLs stop the start: exit 1, naming each, the values not shown', async (t) => {
  const r = startWith({ EMBEDDINGS_BASE_URL: 'sk-embed-secret', TTS_BASE_URL: 'sk-tts-secret', STT_BASE_URL: 'ftp://stt.example.com/sk-stt-secret' });
  t.equal(r.status, 1);
  t.match(r.stderr, /switchboard failed to start: .*invalid configuration: /);
  for (const name of ['EMBEDDINGS_BASE_URL', 'TTS_BASE_URL', 'STT_BASE_URL']) t.match(r.stderr, new RegExp(`${name}: ${name} must be an http or https URL`), name);
  t.notMatch(r.stderr, /secret/, 'the values are not shown');
  t.notMatch(r.stdout, /serving:/);
});

t.test('METRICS_BUCKET_MS: decimal digits, 10 to 60000 (a minute at most; shorter for tests), as buckets.ts reads it', async (t) => {
  for (const ms of ['10', '400', '060000', '60000']) t.doesNotThrow(() => loadConfig({ METRICS_BUCKET_MS: ms }), ms);
  for (const ms of ['abc', '0', '9', '60001', '3600000', '-400', '400.5', ' 400', '0x190', '4e2', '  ']) {
    t.throws(() => loadConfig({ METRICS_BUCKET_MS: ms }), { message: /^invalid configuration: METRICS_BUCKET_MS: / }, JSON.stringify(ms));
  }
});

t.test('METRICS_BUCKET_MS=abc stops the start: exit 1, naming it, rather than a minute in its place', async (t) => {
  const r = startWith({ METRICS_BUCKET_MS: 'abc' });
  t.equal(r.status, 1);
  t.match(r.stderr, /switchboard failed to start: .*invalid configuration: METRICS_BUCKET_MS: must be a whole number in decimal digits/);
  t.notMatch(r.stdout, /serving:/);
});

/** Numeric variables of every kind, with their bounds and where the config holds them. */
const NUMERIC: Array<[string, number, number, (c: Config) => number | null | undefined]> = [
  ['EDGE_PORT', 0, 65535, (c) => c.edgePort],
  ['SIP_TLS_PORT', 0, 65535, (c) => c.media.tlsPort],
  ['METRICS_PORT', 0, 65535, (c) => c.metricsPort],
  ['RECORDING_RETENTION_DAYS', 0, 36_500, (c) => c.recordings.retentionDays],
  ['SHARDS', 1, 4096, (c) => c.shardCount],
  ['ASK_TIMEOUT_MS', 100, 600_000, (c) => c.askTimeoutMs],
  ['CONVERSATION_MAX_ATTRIBUTES_BYTES', 4096, 16 * 1024 * 1024, (c) => c.conversationMaxAttributesBytes],
];

t.test("CONVERSATION_MAX_ATTRIBUTES_BYTES: 64 KiB by default, 4 KiB at least, what a messaging session's attributes always fit in", async (t) => {
  t.equal(loadConfig({}).conversationMaxAttributesBytes, 64 * 1024);
  t.throws(() => loadConfig({ CONVERSATION_MAX_ATTRIBUTES_BYTES: '4095' }), { message: /^invalid configuration: CONVERSATION_MAX_ATTRIBUTES_BYTES: / });
  // The session starts its conversation with its platform and the user agent cut to 512 characters (sessions.ts), of
  // which no message adds more: the longest platform, and characters JSON escapes to six bytes each.
  const longest = PLATFORMS.reduce((a, b) => (b.length > a.length ? b : a));
  t.ok(attributesBytes({ platform: longest, user_agent: '\u0001'.repeat(512) }) <= 4096, 'the largest a session brings fits the least bound');
});

/** Strings that are not a decimal integer: any text, and the near misses `Number()` takes for one. */
const notDecimal = fc
  .oneof(
    fc.string(),
    fc.string({ unit: fc.constantFrom(' ', '\t', '\n', '0', '1', '9', '-', '+', '.', 'e', 'x', 'X', 'b', 'o', '_', ',', 'a', 'F') }),
    fc.integer({ min: 0, max: 65535 }).chain((n) => fc.constantFrom(` ${n}`, `${n} `, `\t${n}`, `0x${n.toString(16)}`, `${n}e0`, `${n}.0`, `+${n}`, `${n}.`, `0b${n.toString(2)}`, `0o${n.toString(8)}`)),
  )
  // '' is unset (the default), as for every variable.
  .filter((v) => v !== '' && !/^\d+$/.test(v));

t.test('a numeric variable that is not written in decimal digits is refused, naming it (whitespace is not 0, 0x1F90 is not 8080)', async (t) => {
  for (const [name, v] of [['EDGE_PORT', '  '], ['EDGE_PORT', '0x1F90'], ['EDGE_PORT', '1e3'], ['EDGE_PORT', ' 8080 '], ['RECORDING_RETENTION_DAYS', ' '], ['SHARDS', '-1']]) {
    t.throws(() => loadConfig({ [name]: v }), { message: new RegExp(`^invalid configuration: ${name}: `) }, `${name}=${JSON.stringify(v)}`);
  }
  fc.assert(
    fc.property(fc.constantFrom(...NUMERIC), notDecimal, ([name], v) => {
      try {
        loadConfig({ [name]: v });
        return false;
      } catch (err) {
        return new RegExp(`^invalid configuration: ${name}: `).test((err as Error).message);
      }
    }),
    { numRuns: 2000 },
  );
  t.pass('refused, naming the variable');
});

t.test('a decimal integer in range is taken as its value (leading zeros too); out of range is refused', async (t) => {
  const inRange = fc.constantFrom(...NUMERIC).chain((entry) => fc.tuple(fc.constant(entry), fc.integer({ min: entry[1], max: entry[2] }), fc.nat({ max: 3 })));
  fc.assert(
    fc.property(inRange, ([[name, , , read], n, zeros]) => read(loadConfig({ [name]: '0'.repeat(zeros) + String(n) })) === n),
    { numRuns: 2000 },
  );
  const outOfRange = fc.constantFrom(...NUMERIC).chain((entry) => fc.tuple(fc.constant(entry), fc.oneof(fc.integer({ min: entry[2] + 1 }), fc.constantFrom('99999999999999999999999'))));
  fc.assert(
    fc.property(outOfRange, ([[name], n]) => {
      try {
        loadConfig({ [name]: String(n) });
        return false;
      } catch (err) {
        return new RegExp(`^invalid configuration: ${name}: `).test((err as Error).message);
      }
    }),
  );
  t.pass('taken as written, or refused out of range');
  // Rates take a fraction: still decimal digits.
  t.equal(loadConfig({ CHAT_RATE_PER_KEY: '0.5' }).edge.chatPerKey.rate, 0.5);
  for (const v of ['.5', '5.', ' 0.5', '5e-1', '0x1']) t.throws(() => loadConfig({ CHAT_RATE_PER_KEY: v }), { message: /^invalid configuration: CHAT_RATE_PER_KEY: / }, v);
});

t.test('the helper takes a leading minus only where negatives are in range', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: -1000, max: 1000 }), (n) => {
      const signed = integer(-1000, 1000).safeParse(String(n));
      const unsigned = integer(0, 1000).safeParse(String(n));
      return signed.success && signed.data === n && unsigned.success === n >= 0 && (!unsigned.success || unsigned.data === n);
    }),
  );
  t.notOk(integer(-10, 10).safeParse('- 1').success);
  t.notOk(integer(-10, 10).safeParse('+1').success);
  t.notOk(integer(-10, 10).safeParse('--1').success);
});

t.test('EDGE_PORT of whitespace stops the start: exit 1, naming it, not a random port', async (t) => {
  const r = startWith({ EDGE_PORT: '  ' });
  t.equal(r.status, 1);
  t.match(r.stderr, /switchboard failed to start: .*invalid configuration: EDGE_PORT: must be a whole number in decimal digits/);
  t.notMatch(r.stdout, /serving:/);
});
