import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { DIST } from './platform.js';

/** The repository root (the TypeScript sources), from dist/. */
export const ROOT = join(DIST, '..');

/** A regular expression literal found in the sources. */
export interface FoundRegex {
  file: string;
  line: number;
  source: string;
  flags: string;
}

function tsFiles(dir: string, skip: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (skip.has(relative(ROOT, path))) continue;
    if (statSync(path).isDirectory()) out.push(...tsFiles(path, skip));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/**
 * Every regular expression literal in the TypeScript files under `dirs` (relative to the root), and every
 * `new RegExp(...)`/`RegExp(...)` call site (whose pattern is built at run time and so cannot be read here).
 */
export function findRegexes(dirs: string[], skip: string[] = []): { literals: FoundRegex[]; constructed: Array<{ file: string; line: number }> } {
  const literals: FoundRegex[] = [];
  const constructed: Array<{ file: string; line: number }> = [];
  for (const file of dirs.flatMap((d) => tsFiles(join(ROOT, d), new Set(skip)))) {
    const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const where = (n: ts.Node) => ({ file: relative(ROOT, file), line: sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1 });
    const visit = (n: ts.Node) => {
      if (n.kind === ts.SyntaxKind.RegularExpressionLiteral) {
        const text = n.getText(sf);
        const end = text.lastIndexOf('/');
        literals.push({ ...where(n), source: text.slice(1, end), flags: text.slice(end + 1) });
      } else if ((ts.isNewExpression(n) || ts.isCallExpression(n)) && n.expression.getText(sf) === 'RegExp') {
        constructed.push(where(n));
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return { literals, constructed };
}

/** Characters adversarial inputs are made of: the classes and separators patterns here care about. */
const SINGLES = ['a', 'Z', 'é', '0', '9', ' ', '\t', '\n', '-', '_', '.', ',', '@', '/', ':', ';', '"', "'", '\u201c', '\u201d', '+', '(', ')', '!', '?', '#', '%', '=', '\u0000', '\ud800'];
const PAIRED = ['a', '0', ' ', '-', '.', '@', '/', ':', '"', '\u201c'];

/**
 * Worst-case inputs of `size` characters for a regular expression: long runs of one character and of
 * alternating pairs, each also ending in a character that breaks a match, so a backtracking engine that is
 * not linear in the input shows it. `extra` adds a checker's own attack strings.
 */
export function adversarialInputs(size: number, extra: string[] = []): string[] {
  const out: string[] = [];
  for (const c of SINGLES) {
    out.push(c.repeat(size));
    out.push(c.repeat(size - 1) + (c === '\u0000' ? '!' : '\u0000'));
  }
  for (const a of PAIRED) for (const b of PAIRED) if (a !== b) out.push((a + b).repeat(size / 2));
  for (const e of extra) out.push(e.length >= size ? e.slice(0, size) : e.repeat(Math.ceil(size / Math.max(1, e.length))).slice(0, size));
  return out;
}

/** CPU time (user + system, ms) spent running `fn`. */
export function cpuMs(fn: () => void): number {
  const start = process.cpuUsage();
  fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}
