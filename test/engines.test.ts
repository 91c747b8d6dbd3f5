/**
 * No EBADENGINE on the Node this runs on (20 on the build machines): every installed package, and every
 * package of the lock file a fresh `npm install` would install, accepts `process.version` in its
 * `engines.node` (`scripts/check-engines.mjs`, which the README names for a manual check).
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const script = join(root, 'scripts', 'check-engines.mjs');

const run = (dir: string): { code: number; out: string } => {
  try {
    return { code: 0, out: execFileSync(process.execPath, [script, dir], { encoding: 'utf8' }) };
  } catch (err) {
    const e = err as { status: number; stdout: string };
    return { code: e.status, out: e.stdout };
  }
};

t.test('every installed and locked package accepts this Node version', async (t) => {
  const { code, out } = run(root);
  t.equal(code, 0, out);
  t.match(out, `: 0 engine mismatches`);
});

t.test('the check finds a package that wants a newer Node', async (t) => {
  // A copy of the layout with one package like @nats-io/nuid@3.0.0 (engines `>= 22.x`) on Node 20, nested.
  const dir = mkdtempSync(join(tmpdir(), 'sb-engines-'));
  const pkg = (at: string, manifest: object) => {
    mkdirSync(at, { recursive: true });
    writeFileSync(join(at, 'package.json'), JSON.stringify(manifest));
  };
  const major = Number(process.versions.node.split('.')[0]);
  pkg(dir, { name: 'fixture', version: '1.0.0' });
  pkg(join(dir, 'node_modules', 'semver'), { name: 'semver', version: '0.0.0', main: 'index.js' });
  writeFileSync(join(dir, 'node_modules', 'semver', 'index.js'), `module.exports = require(${JSON.stringify(join(root, 'node_modules', 'semver'))});`);
  pkg(join(dir, 'node_modules', 'ok'), { name: 'ok', version: '1.0.0', engines: { node: `>=${major - 2}` } });
  pkg(join(dir, 'node_modules', 'a', 'node_modules', '@scope', 'newer'), { name: '@scope/newer', version: '3.0.0', engines: { node: `>= ${major + 2}.x` } });
  writeFileSync(join(dir, 'package-lock.json'), JSON.stringify({
    lockfileVersion: 3,
    packages: { '': { name: 'fixture' }, 'node_modules/locked': { version: '2.0.0', engines: { node: `>=${major + 2}` } } },
  }));
  const { code, out } = run(dir);
  t.equal(code, 1);
  t.match(out, `installed: @scope/newer@3.0.0 requires node >= ${major + 2}.x`);
  t.match(out, `package-lock.json: locked@2.0.0 requires node >=${major + 2}`);
  t.notMatch(out, 'ok@1.0.0');
});
