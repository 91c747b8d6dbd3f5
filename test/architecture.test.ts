/**
 * The import rules of DESIGN.md, checked on the TypeScript sources (read from the repository, two folders up
 * from this compiled file in `dist/test/`):
 * - `gateway/`, `platform/` and `bin/` reach `actors/` only through public modules: `actors/mod.ts` (the
 *   runtime, including its transport and placement) and `actors/<kind>/mod.ts` (one per actor kind or
 *   effect: conversation, session, functions, responder).
 * - `machines/` imports nothing from `actors/`, `gateway/` or `store/`.
 * - `actors/` provides effects as tasks (`fromEffect`, `fromTask`), never as `fromPromise` actors.
 */
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The runtime's own folders: public to `actors/*.ts`, reached from outside through `actors/mod.ts`. */
const RUNTIME_DIRS = new Set(['transport', 'placement']);

function sourcesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = posix.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourcesUnder(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** Module specifiers of static imports, re-exports and dynamic imports (comments stripped first). */
function specifiersOf(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
  const found: string[] = [];
  const patterns = [
    /\b(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const re of patterns) for (const m of code.matchAll(re)) found.push(m[1]);
  return found;
}

/** The repository path (posix, `.ts`) a relative specifier of `file` points at; null for packages. */
function target(file: string, specifier: string): string | null {
  if (!specifier.startsWith('.')) return null;
  const joined = posix.normalize(posix.join(posix.dirname(file), specifier));
  return joined.replace(/\.js$/, '.ts');
}

/** Why an import from outside `actors/` into `path` is not allowed, or null if it goes through a public module. */
function deepActorImport(path: string): string | null {
  const parts = path.split('/');
  if (parts[0] !== 'actors') return null;
  if (parts.length === 2 && parts[1] === 'mod.ts') return null;
  if (parts.length === 3 && parts[2] === 'mod.ts' && !RUNTIME_DIRS.has(parts[1])) return null;
  if (parts.length >= 3 && RUNTIME_DIRS.has(parts[1])) return `${path} is inside the runtime; import actors/mod.ts`;
  if (parts.length >= 3) return `${path} is inside the ${parts[1]} kind; import actors/${parts[1]}/mod.ts`;
  return `${path} is inside the runtime; import actors/mod.ts`;
}

t.test('the checks see imports of every form', async (t) => {
  const sample = [
    "import { a } from '../../actors/conversation/record.js';",
    "import type { B } from '../actors/mod.js';",
    "export { c } from './x.js';",
    "import './side-effect.js';",
    "const d = await import('../../actors/protocol.js');",
    "// import { e } from '../../actors/session/kind.js';",
    "/* import { f } from '../../actors/session/kind.js'; */",
  ].join('\n');
  t.same(specifiersOf(sample), [
    '../../actors/conversation/record.js',
    '../actors/mod.js',
    './x.js',
    './side-effect.js',
    '../../actors/protocol.js',
  ]);
  t.equal(target('gateway/edge/chat.ts', '../../actors/conversation/record.js'), 'actors/conversation/record.ts');
  t.equal(target('gateway/edge/chat.ts', 'fastify'), null);
  t.equal(deepActorImport('actors/mod.ts'), null);
  t.equal(deepActorImport('actors/conversation/mod.ts'), null);
  t.equal(deepActorImport('actors/functions/mod.ts'), null);
  t.ok(deepActorImport('actors/conversation/record.ts'));
  t.ok(deepActorImport('actors/protocol.ts'));
  t.ok(deepActorImport('actors/transport/mod.ts'));
  t.ok(deepActorImport('actors/transport/types.ts'));
  t.equal(deepActorImport('platform/errors.ts'), null);
});

t.test('gateway/, platform/ and bin/ import actors/ only through public modules', async (t) => {
  const files = ['gateway', 'platform', 'bin'].flatMap(sourcesUnder);
  t.ok(files.length > 10, `found ${files.length} sources`);
  const deep: string[] = [];
  let actorImports = 0;
  for (const file of files) {
    for (const spec of specifiersOf(readFileSync(join(root, file), 'utf8'))) {
      const path = target(file, spec);
      if (path === null) continue;
      if (path.startsWith('actors/')) actorImports++;
      const why = deepActorImport(path);
      if (why) deep.push(`${file}: ${why}`);
    }
  }
  t.ok(actorImports > 0, 'the scan sees the imports of actors/');
  t.same(deep, [], 'no deep imports into actors/');
});

t.test('machines/ import nothing from actors/, gateway/ or store/', async (t) => {
  const files = sourcesUnder('machines');
  t.ok(files.length > 0, `found ${files.length} machines`);
  const bad: string[] = [];
  for (const file of files) {
    for (const spec of specifiersOf(readFileSync(join(root, file), 'utf8'))) {
      const path = target(file, spec);
      if (path === null) continue;
      const top = path.split('/')[0];
      if (top === 'actors' || top === 'gateway' || top === 'store' || path.startsWith('..')) bad.push(`${file} imports ${spec}`);
    }
  }
  t.same(bad, [], 'machines are pure');
});

t.test('actor kinds provide their effects as tasks (actors/task.ts), not as fromPromise actors', async (t) => {
  // XState's `fromPromise` makes an AbortController for every run, and no effect here is cancelled through it;
  // machines declare their actors with `fromPromise` (a typed placeholder), which the kind replaces.
  const files = sourcesUnder('actors');
  const bad = files.filter((file) => /\bfromPromise\s*\(/.test(readFileSync(join(root, file), 'utf8')));
  t.ok(files.length > 0);
  t.same(bad, [], 'use fromEffect or fromTask');
});
