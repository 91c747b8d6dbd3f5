/**
 * The environment as `platform/config.ts` reads it: a value the platform cannot use as given stops the start,
 * exit 1, with `invalid configuration: <VARIABLE>: ...` (docs/configuration.md), rather than being taken for
 * something else or left to fail later.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { loadConfig } from '../platform/config.js';
import { MAIN } from './helpers/platform.js';

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

t.test('LLM_BASE_URL=not-a-url and LLM_TIMEOUT_MS=abc stop the start: exit 1, naming both', async (t) => {
  const r = startWith({ LLM_BASE_URL: 'not-a-url', LLM_TIMEOUT_MS: 'abc' });
  t.equal(r.status, 1);
  t.match(r.stderr, /switchboard failed to start: .*invalid configuration: .*LLM_BASE_URL: /);
  t.match(r.stderr, /LLM_TIMEOUT_MS: /);
  t.notMatch(r.stdout, /serving:/);
});
