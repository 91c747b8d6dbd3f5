import { createHash } from 'node:crypto';

/** A knowledge-base topic. `name` is unique within a branch. */
export interface Topic {
  id: string;
  name: string;
  content: string;
}

/** A variant dimension, such as `site` or `region`. */
export interface Attribute {
  id: string;
  name: string;
}

/** Site-specific overrides: a value per attribute (keyed by attribute id). */
export interface Variant {
  id: string;
  name: string;
  isDefault: boolean;
  attributeValues: { values: Record<string, string> };
}

/** A project function: JavaScript run in the sandbox (actors/functions). `name` is its key. */
export interface ProjectFunction {
  name: string;
  code: string;
}

/**
 * Everything a branch holds and an artifact freezes. Items are keyed by id so that a three-way merge can
 * tell "changed on one side" from "changed on both". No timestamps here: they would make every edit a
 * conflict.
 */
export interface Content {
  behavior: string;
  topics: Record<string, Topic>;
  attributes: Record<string, Attribute>;
  variants: Record<string, Variant>;
  /** Keyed by name (hooks `start`, `turn`, `end`; any other name is a tool). */
  functions: Record<string, ProjectFunction>;
  /** How the agent sounds on a call (absent: the media gateway's defaults). */
  voice?: VoiceConfig;
}

/** Voice settings of a branch, deployed with its artifact: the speech engine's voice name and words per minute. */
export interface VoiceConfig {
  voice: string;
  rate: number;
}

export const emptyContent = (): Content => ({ behavior: '', topics: {}, attributes: {}, variants: {}, functions: {} });

/** Content stored before functions existed has none; read it as an empty set. */
export const withDefaults = (c: Content): Content => ({ ...emptyContent(), ...c });

/** JSON with object keys sorted, so equal content always serialises (and hashes) the same. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The artifact version of some content: the first 16 hex digits of the SHA-256 of its canonical JSON. */
export function contentHash(content: Content): string {
  return createHash('sha256').update(canonicalJson(content)).digest('hex').slice(0, 16);
}

export const sameValue = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b);
