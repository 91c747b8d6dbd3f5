import { pathToFileURL } from 'node:url';
import { projectors } from './registry.js';
import type { Projector } from './types.js';

/**
 * The registry's projectors plus those of `modules` (paths of ES modules exporting `projectors()`, the
 * `PROJECTION_MODULES` setting; the tests add their own projector this way). Names must be unique.
 */
export async function loadProjectors(modules: string[] = []): Promise<Projector[]> {
  const all = [...projectors()];
  for (const path of modules) {
    const mod = (await import(pathToFileURL(path).href)) as { projectors?: () => Projector[] };
    if (typeof mod.projectors !== 'function') throw new Error(`projection module ${path} exports no projectors()`);
    all.push(...mod.projectors());
  }
  const names = new Set<string>();
  for (const p of all) {
    if (names.has(p.name)) throw new Error(`two projectors are called ${p.name}`);
    names.add(p.name);
  }
  return all;
}
