/**
 * The README's walkthrough, run as a newcomer runs it: the first shell block under "## Walkthrough", as written,
 * with bash in a fresh clone of this repository (its `npm start` rebuilds `dist/`, so it must not run in the
 * checkout the other tests run from). The clone shares this checkout's `node_modules`: the walkthrough begins
 * after the README's set-up command. Only the ports are chosen here, through the variables the block reads.
 */
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DIST } from './helpers/platform.js';
import { freePort } from './helpers/nats.js';

// This file takes 90 to 110 s on a 2-core machine (it runs the README's walkthrough end to end on real processes), within reach of the suite's 180 s per
// file: it asks the runner for more, so that a slower or busier machine does not fail it on time alone.
t.setTimeout(300_000);

const ROOT = join(DIST, '..');

/** The first ```sh block after the "## Walkthrough" heading. */
function walkthrough(readme: string): string {
  const section = readme.indexOf('\n## Walkthrough');
  if (section < 0) throw new Error('README has no "## Walkthrough" section');
  const start = readme.indexOf('```sh\n', section);
  const end = readme.indexOf('\n```', start + 6);
  return readme.slice(start + 6, end + 1);
}

/** This process's environment without what a newcomer's shell would not have set. */
function newcomerEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['OPERATOR_TOKEN', 'DATA_DIR', 'HOST', 'NATS_URL', 'MONGODB_URL', 'SWITCHBOARD_URL']) delete env[name];
  return env;
}

t.test('the README walkthrough runs as written and ends with the agent answering', { timeout: 240_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-walkthrough-'));
  const clone = join(dir, 'switchboard');
  const cloned = spawnSync('git', ['clone', '-q', ROOT, clone], { encoding: 'utf8' });
  t.equal(cloned.status, 0, `a fresh clone: ${cloned.stderr}`);
  symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'));
  const script = walkthrough(readFileSync(join(clone, 'README.md'), 'utf8'));

  const [edge, socket] = [await freePort(), await freePort()];
  // Its own process group, so the platform the block starts in the background ends with it.
  const child = spawn('bash', ['-e', '-c', script], {
    cwd: clone,
    env: { ...newcomerEnv(), EDGE_PORT: String(edge), SOCKET_PORT: String(socket) },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (typeof child.pid === 'number' && child.pid > 1) {
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));

  t.equal(code, 0, 'every command succeeded', { output: out.slice(-3000) });
  t.match(out, /"response":"We open 9 to 5, Monday to Friday\."/, 'the agent answers the opening hours from main');
  t.match(out, /"response":"Parking is free behind the building\."/, 'and parking, merged from the summer branch');
  t.match(out, /"environment":"live"/, 'after promotion to live');
  // What follows the chat's close is the Conversations API's answer.
  const read = out.slice(out.lastIndexOf('{"success":true}'));
  t.match(read, /We open 9 to 5, Monday to Friday\.[\s\S]*Parking is free behind the building\./, 'the Conversations API shows both answers');
});
