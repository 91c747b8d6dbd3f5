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
