/**
 * Every way the platform is started runs node with the same V8 flags (docs/runtime.md, "Memory"): `npm start`,
 * each line of the `Procfile`, and the platform processes the tests and benchmarks start (`NODE_FLAGS`).
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from './helpers/platform.js';

/** The repository root, from dist/test. */
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const command = `node ${NODE_FLAGS.join(' ')} dist/platform/main.js`;

t.test('the flags are the young generation, the first size of the old generation and no allocation-site pretenuring', async (t) => {
  t.same(NODE_FLAGS, ['--max-semi-space-size=64', '--initial-old-space-size=1024', '--no-allocation-site-pretenuring']);
});

t.test('npm start runs the platform with them', async (t) => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  // `exec`: the shell npm runs the script in is replaced by node, which npm's SIGTERM then reaches (platform.npm-start.test.ts).
  t.equal(pkg.scripts.start, `exec ${command}`);
});

t.test('every Procfile role runs the platform with them', async (t) => {
  const lines = readFileSync(join(root, 'Procfile'), 'utf8').split('\n').filter((l) => l.trim() !== '');
  t.ok(lines.length >= 3, 'edge, socket and worker at least');
  for (const line of lines) {
    const [role, cmd] = line.split(/:\s*/, 2);
    t.equal(cmd, `${command} ${role}`, role);
  }
});
