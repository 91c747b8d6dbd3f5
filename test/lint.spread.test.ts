/**
 * No object literal that begins with a spread adds properties after it.
 *
 * Why: in Node 20's V8 an object cloned by a leading spread (`{ ...a }`) does not reuse the map transitions
 * of its shape, so every property added to the clone afterwards (`{ ...a, b: 1 }`, `{ ...a, ...{ b: 1 } }`)
 * takes the slow path and makes a new map: about half a microsecond per added property, against nanoseconds
 * for a literal that names its own properties first (`{ b: 1, ...a }`) or for `Object.assign({}, a, { b: 1 })`.
 * The conversation's events were built as `{ ...owner(c), ... }`, which cost a chat turn about 40 µs of
 * its main thread. Overriding a property the spread already has stays fast and is allowed.
 *
 * The check reads the program with TypeScript's checker: a property after the leading spread, or a later
 * spread's property, that the leading spread's type does not have is an addition. Spreads of index-signature
 * types (`Record<string, unknown>`) have no known properties, so any named property after one counts.
 */
import t from 'tap';
import ts from 'typescript';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The product's source; tests and benchmarks build fixtures once and are left out. */
const DIRS = ['actors', 'gateway', 'store', 'machines', 'platform', 'builder', 'bin', 'tenancy'].map((d) => join(root, d) + '/');

/** Every object literal in `sources` that begins with a spread and adds a property after it, as `file:line name`. */
function additionsAfterLeadingSpread(program: ts.Program, sources: readonly ts.SourceFile[]): string[] {
  const checker = program.getTypeChecker();
  const propsOf = (e: ts.Expression): Set<string> => {
    const type = checker.getTypeAtLocation(e);
    const names = new Set(checker.getPropertiesOfType(type).map((s) => s.name));
    if (type.isUnion()) for (const u of type.types) for (const s of checker.getPropertiesOfType(u)) names.add(s.name);
    return names;
  };
  const found: string[] = [];
  for (const sf of sources) {
    const visit = (node: ts.Node): void => {
      if (ts.isObjectLiteralExpression(node) && node.properties.length > 1 && ts.isSpreadAssignment(node.properties[0])) {
        const known = propsOf(node.properties[0].expression);
        for (const p of node.properties.slice(1)) {
          const added = ts.isSpreadAssignment(p)
            ? [...propsOf(p.expression)].filter((k) => !known.has(k))
            : [p.name && (ts.isIdentifier(p.name) || ts.isStringLiteral(p.name)) ? p.name.text : p.getText(sf)].filter((k) => !known.has(k));
          if (added.length > 0) {
            found.push(`${relative(root, sf.fileName)}:${sf.getLineAndCharacterOfPosition(p.getStart(sf)).line + 1} ${added.join(', ')}`);
            break;
          }
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return found;
}

t.test('the product source adds no property after a leading spread', async (t) => {
  const config = ts.getParsedCommandLineOfConfigFile(join(root, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
  if (!config) throw new Error('tsconfig.json could not be read');
  const files = config.fileNames.filter((f) => DIRS.some((d) => f.startsWith(d)));
  t.ok(files.length > 100, `read ${files.length} source files`);
  const program = ts.createProgram(files, config.options);
  const sources = program.getSourceFiles().filter((sf) => DIRS.some((d) => sf.fileName.startsWith(d)));
  t.same(additionsAfterLeadingSpread(program, sources), [], 'put the new properties first, or use Object.assign({}, a, { ... })');
});

t.test('the check tells an addition from an override', async (t) => {
  const file = join(root, 'machines', '__lint_spread_fixture.ts');
  const text = [
    'const a = { x: 1, y: 2 };',
    'const r: Record<string, number> = {};',
    'export const added = { ...a, z: 3 };',
    'export const addedBySpread = { ...a, ...{ z: 3 } };',
    'export const fromIndex = { ...r, z: 3 };',
    'export const overridden = { ...a, x: 3 };',
    'export const literalFirst = { z: 3, ...a, w: 4 };',
    'export const assigned = Object.assign({}, a, { z: 3 });',
  ].join('\n');
  const host = ts.createCompilerHost({ strict: true });
  const read = host.getSourceFile;
  host.getSourceFile = (name, ...rest) => (name === file ? ts.createSourceFile(name, text, ts.ScriptTarget.ES2022, true) : read.call(host, name, ...rest));
  host.fileExists = ((exists) => (name: string) => name === file || exists(name))(host.fileExists);
  const program = ts.createProgram([file], { strict: true, noEmit: true, types: [] }, host);
  const found = additionsAfterLeadingSpread(program, [program.getSourceFile(file)!]);
  t.same(found.map((f) => f.replace(/^.*:(\d+) /, '$1 ')), ['3 z', '4 z', '5 z']);
});
