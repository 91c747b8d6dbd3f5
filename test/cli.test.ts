/**
 * The operator CLI works as the README's walkthrough uses it, after every `npm run build`: the build leaves
 * `dist/bin/switchboard.js` executable (tsc writes it without the execute bit), it runs as a program of its
 * own (its `#!/usr/bin/env node` line) from any directory, `npx switchboard` finds it from a subdirectory of
 * the checkout, and `help` names every key scope and every command, which all reach the admin API.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { constants, accessSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KEY_SCOPES } from '../tenancy/keys.js';
import { http } from './helpers/http.js';
import { CLI, DIST, platformFor, removeDir } from './helpers/platform.js';

const run = promisify(execFile);
const ROOT = join(DIST, '..');
const elsewhere = mkdtempSync(join(tmpdir(), 'sb-cli-cwd-'));
t.teardown(() => removeDir(elsewhere));

const COMMANDS = [
  'accounts create', 'accounts list',
  'keys create', 'keys list', 'keys revoke',
  'connectors create', 'connectors list', 'connectors delete',
  'settings get', 'settings set',
  'runtime show', 'runtime cache', 'runtime actor', 'runtime projections',
  'rebuild',
  'help',
];

t.test('the build leaves the CLI executable', async (t) => {
  // Checked before anything runs it through npx (which may set the bit itself).
  const mode = statSync(CLI).mode;
  t.equal(mode & 0o111, 0o111, `dist/bin/switchboard.js mode ${(mode & 0o777).toString(8)}`);
  t.doesNotThrow(() => accessSync(CLI, constants.X_OK));
  t.match(readFileSync(CLI, 'utf8'), /^#!\/usr\/bin\/env node\n/);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  t.equal(pkg.bin.switchboard, 'dist/bin/switchboard.js');
  t.match(pkg.scripts.build, 'chmodSync', 'the build script sets the bit after tsc');
});

t.test('run directly from another directory, help names every scope and command', async (t) => {
  const { stdout } = await run(CLI, ['help'], { cwd: elsewhere });
  for (const scope of KEY_SCOPES) t.match(stdout, new RegExp(`\\b${scope}\\b`), `scope ${scope}`);
  for (const command of COMMANDS) t.match(stdout, `\n  ${command}`, `command ${command}`);
});

t.test('npx switchboard from a subdirectory of the checkout', async (t) => {
  const { stdout } = await run('npx', ['--no-install', 'switchboard', 'help'], { cwd: join(ROOT, 'docs') });
  t.match(stdout, 'usage: switchboard');
  t.match(stdout, 'runtime actor KIND ID');
});

t.test('every command reaches the admin API, from another directory', async (t) => {
  const p = await platformFor(t);
  const env = { ...process.env, SWITCHBOARD_URL: p.edge, OPERATOR_TOKEN: p.operatorToken };
  const cli = async (...args: string[]) => {
    const { stdout } = await run(CLI, args, { cwd: elsewhere, env });
    return JSON.parse(stdout);
  };
  const account = await cli('accounts', 'create', '--name', 'Acme', '--slug', 'acme');
  t.equal(account.slug, 'acme');
  t.match(await cli('accounts', 'list'), { data: [{ slug: 'acme' }] });
  const key = await cli('keys', 'create', '--account', 'acme', '--scope', 'agents');
  t.match(key, { scope: 'agents', key: String });
  t.match(await cli('keys', 'list', '--account', account.id), { data: [{ id: key.id }] });
  t.same(await cli('keys', 'list', '--account', 'acme'), await cli('keys', 'list', '--account', account.id), 'the account by its slug too');
  // A project's settings, the recording retention included: set, then given back to the deployment's default.
  const agents = await http(p.edge, 'POST', '/v1/agents', { body: { name: 'Settings' }, headers: { 'x-api-key': key.key } });
  t.equal(agents.status, 201);
  t.match(await cli('settings', 'set', agents.body.agentId, '--recording-retention-days', '7', '--pii-redaction', 'false'), { recording_retention_days: 7, pii_redaction: false });
  const reset = await cli('settings', 'set', agents.body.agentId, '--recording-retention-days', 'default');
  t.notOk('recording_retention_days' in reset, 'default: the project has no retention of its own');
  const bad = await run(CLI, ['settings', 'set', agents.body.agentId, '--recording-retention-days', '1.5'], { cwd: elsewhere, env }).catch((e) => e);
  t.equal(bad.code, 2, 'a fraction of a day is a usage error, refused before any request');
  t.match(bad.stderr, /--recording-retention-days takes a whole number of days/);
  t.same(await cli('keys', 'revoke', key.id), { status: 204 });
  t.match(await cli('connectors', 'list'), { data: [] });
  t.match(await cli('runtime', 'show'), { shardCount: Number, workers: Array });
  t.match(await cli('runtime', 'cache'), { caches: { keys: Object } });
  t.match(await cli('runtime', 'projections'), { head: Number, caughtUp: Boolean, projections: Array });
  const model = await run(CLI, ['rebuild', 'no-such-model'], { cwd: elsewhere, env }).catch((e) => e);
  t.equal(model.code, 1, 'rebuild of an unknown model fails');
  t.match(JSON.parse(model.stderr), { message: 'projection not found' });
  const missing = await run(CLI, ['runtime', 'actor', 'conversation', 'nope'], { cwd: elsewhere, env }).catch((e) => e);
  t.equal(missing.code, 1);
  t.match(JSON.parse(missing.stderr), { message: String });
});

/** Whether this machine has an IPv6 loopback to listen on. */
async function hasIpv6Loopback(): Promise<boolean> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ host: '::1', port: 0 }, () => probe.close(() => resolve(true)));
  });
}

t.test('HOST an IPv6 address: the start names its URLs in brackets, and the CLI reaches the edge from HOST and EDGE_PORT alone', async (t) => {
  if (!(await hasIpv6Loopback())) {
    t.comment('this machine has no IPv6 loopback: nothing to check');
    return;
  }
  const p = await platformFor(t, { env: { HOST: '::1' } });
  t.match(p.edge, /^http:\/\/\[::1\]:\d+$/, `the banner's edge URL (${p.edge})`);
  t.match(p.stdout(), /media sip:\[::1\]:\d+/, 'and its SIP address');
  const port = new URL(p.edge).port;
  const env = { ...process.env, SWITCHBOARD_URL: undefined, HOST: '::1', EDGE_PORT: port, OPERATOR_TOKEN: p.operatorToken };
  const { stdout } = await run(CLI, ['accounts', 'list'], { cwd: elsewhere, env });
  t.match(JSON.parse(stdout), { data: [] }, 'http://[::1]:EDGE_PORT');
});
