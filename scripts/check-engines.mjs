#!/usr/bin/env node
/**
 * Checks that every installed package (node_modules, nested ones included) and every package the lock file
 * would install accepts this Node version in its `engines.node`: what `npm install` reports as EBADENGINE.
 * Prints one line per mismatch and exits 1 when there is any. Usage: node scripts/check-engines.mjs [root]
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createRequire } from 'node:module';

const root = resolve(process.argv[2] ?? join(import.meta.dirname, '..'));
const semver = createRequire(join(root, 'package.json'))('semver');

const mismatches = [];
const check = (where, name, version, engines) => {
  const range = engines && typeof engines === 'object' ? engines.node : undefined;
  if (typeof range !== 'string' || range.trim() === '') return;
  if (!semver.satisfies(process.version, range, { includePrerelease: true })) {
    mismatches.push(`${where}: ${name}@${version} requires node ${range} (running ${process.version})`);
  }
};

/** Every package directory under a node_modules directory, scoped ones and nested node_modules included. */
function* packages(dir) {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || !(entry.isDirectory() || entry.isSymbolicLink())) continue;
    const full = join(dir, entry.name);
    if (entry.name.startsWith('@')) {
      for (const scoped of readdirSync(full, { withFileTypes: true })) {
        if (scoped.isDirectory()) yield* one(join(full, scoped.name));
      }
    } else yield* one(full);
  }
}
function* one(dir) {
  if (existsSync(join(dir, 'package.json'))) yield dir;
  yield* packages(join(dir, 'node_modules'));
}

let installed = 0;
for (const dir of packages(join(root, 'node_modules'))) {
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  } catch {
    continue;
  }
  installed++;
  check('installed', manifest.name ?? dir, manifest.version, manifest.engines);
}

let locked = 0;
const lockFile = join(root, 'package-lock.json');
if (existsSync(lockFile)) {
  const lock = JSON.parse(readFileSync(lockFile, 'utf8'));
  for (const [path, entry] of Object.entries(lock.packages ?? {})) {
    if (path === '' || entry.link) continue;
    locked++;
    check('package-lock.json', entry.name ?? path.replace(/^.*node_modules\//, ''), entry.version, entry.engines);
  }
}

for (const line of mismatches) process.stdout.write(`${line}\n`);
process.stdout.write(`checked ${installed} installed packages and ${locked} lock entries against node ${process.version}: ${mismatches.length} engine mismatches\n`);
process.exit(mismatches.length ? 1 : 0);
