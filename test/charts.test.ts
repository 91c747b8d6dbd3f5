import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MACHINES } from '../machines/catalog.js';
import { CLI, DIST, removeDir } from './helpers/platform.js';

// `switchboard charts --out DIR` renders every machine of the catalog with no server; the charts committed
// under docs/charts/ (which the README shows) are exactly what it writes now: regenerate them with
// `node dist/bin/switchboard.js charts --out docs/charts` after changing a machine.
const ROOT = join(DIST, '..');

t.test('switchboard charts writes one SVG per machine, and docs/charts/ is up to date', async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'sb-charts-'));
  t.teardown(() => removeDir(out));
  const { stdout } = await promisify(execFile)(process.execPath, [CLI, 'charts', '--out', out], { env: { ...process.env, OPERATOR_TOKEN: '' } });
  const kinds = Object.keys(MACHINES).sort();
  t.same(readdirSync(out).sort(), kinds.map((k) => `${k}.svg`), 'one file per kind, no token or server needed');
  t.match(stdout, `${kinds[0]}.svg`);
  const committed = join(ROOT, 'docs', 'charts');
  t.same(readdirSync(committed).filter((f) => f.endsWith('.svg')).sort(), kinds.map((k) => `${k}.svg`), 'docs/charts/ holds every kind and nothing else');
  for (const kind of kinds) {
    const fresh = readFileSync(join(out, `${kind}.svg`), 'utf8');
    t.match(fresh, /^<\?xml[^]*<svg [^]*<\/svg>\n$/);
    t.equal(readFileSync(join(committed, `${kind}.svg`), 'utf8'), fresh, `docs/charts/${kind}.svg is what the command renders (regenerate it)`);
  }
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  for (const kind of kinds) t.match(readme, `docs/charts/${kind}.svg`, `the README shows ${kind}`);
});

t.test('switchboard charts without --out is a usage error', async (t) => {
  const err = await promisify(execFile)(process.execPath, [CLI, 'charts']).catch((e) => e);
  t.equal(err.code, 2);
  t.match(err.stderr, 'missing --out');
});
