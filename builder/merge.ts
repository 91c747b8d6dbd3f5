import type { FieldError } from '../platform/errors.js';
import { own } from '../platform/own.js';
import { type Content, sameValue, type Variant } from './content.js';

/** Outcome of a three-way merge: the merged content, the fields taken from the branch, and any conflicts. */
export interface MergeOutcome {
  content: Content;
  applied: string[];
  conflicts: FieldError[];
}

type Keyed = 'topics' | 'attributes' | 'variants' | 'functions';
const KEYED: Keyed[] = ['topics', 'attributes', 'variants', 'functions'];

/**
 * Three-way merge of `theirs` (the branch) into `ours` (main) against `base` (main as it was when the branch
 * was cut). Per field (`behavior`, and each topic, attribute and variant by id): unchanged on one side takes
 * the other side; changed identically on both is fine; changed differently on both is a conflict. Names must
 * stay unique after the merge, so two different items given the same name on each side also conflict.
 */
export function threeWayMerge(base: Content, ours: Content, theirs: Content): MergeOutcome {
  const applied: string[] = [];
  const conflicts: FieldError[] = [];
  const content: Content = structuredClone(ours);

  const pick = (field: string, b: unknown, o: unknown, t: unknown): unknown => {
    if (sameValue(t, b) || sameValue(o, t)) return o;
    if (sameValue(o, b)) {
      applied.push(field);
      return t;
    }
    conflicts.push({ field, message: 'changed on both main and the branch since the branch was cut' });
    return o;
  };

  content.behavior = pick('behavior', base.behavior, ours.behavior, theirs.behavior) as string;
  const voice = pick('voice', base.voice, ours.voice, theirs.voice) as Content['voice'];
  if (voice === undefined) delete content.voice;
  else content.voice = voice;

  for (const kind of KEYED) {
    // Own properties only: an item one side lacks must read as absent, not as what every object inherits
    // (a function named `constructor` deleted on one side read as `Object`, and the merge stored it).
    const itemOf = (c: Content, id: string) => own(c[kind] as Record<string, unknown> | undefined, id);
    const ids = new Set([...Object.keys(base[kind] ?? {}), ...Object.keys(ours[kind] ?? {}), ...Object.keys(theirs[kind] ?? {})]);
    const merged: Record<string, unknown> = {};
    for (const id of [...ids].sort()) {
      const value = pick(`${kind}.${id}`, itemOf(base, id), itemOf(ours, id), itemOf(theirs, id));
      if (value !== undefined) merged[id] = value;
    }
    (content as unknown as Record<Keyed, Record<string, unknown>>)[kind] = merged;
    conflicts.push(...duplicateNames(kind, merged as Record<string, { name: string }>, (id) => itemOf(ours, id) !== undefined));
  }
  oneDefault(content.variants, ours.variants ?? {});
  return { content, applied, conflicts };
}

/**
 * At most one variant is the default. Each side keeps that, but a merge can bring two: a variant added on the
 * branch is its default as the first there, one added on main meanwhile is main's, and neither side changed the
 * other's. Main's default stays (main had it first, and conversations run it already); the others are not
 * defaults in the merged content. No conflict: nothing was changed differently on both sides.
 */
function oneDefault(variants: Record<string, Variant>, ours: Record<string, Variant>): void {
  const defaults = Object.values(variants).filter((v) => v.isDefault);
  if (defaults.length < 2) return;
  const kept = defaults.find((v) => own(ours, v.id)?.isDefault) ?? defaults[0];
  for (const v of defaults) if (v !== kept) variants[v.id] = { ...v, isDefault: false };
}

/**
 * A conflict for each merged item whose name another one has: the field is the branch's item, the message names
 * main's (items are visited in id order, which says nothing of which side an item came from).
 */
function duplicateNames(kind: Keyed, items: Record<string, { name: string }>, onMain: (id: string) => boolean): FieldError[] {
  const seen = new Map<string, string>();
  const out: FieldError[] = [];
  for (const [id, item] of Object.entries(items)) {
    const first = seen.get(item.name);
    if (first === undefined) {
      seen.set(item.name, id);
      continue;
    }
    const [branchId, mainId] = onMain(id) && !onMain(first) ? [first, id] : [id, first];
    out.push({ field: `${kind}.${branchId}`, message: `name "${item.name}" is also used by ${mainId}${onMain(mainId) ? ' on main' : ''}` });
  }
  return out;
}
