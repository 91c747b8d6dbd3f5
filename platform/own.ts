/**
 * The value a map (a plain object keyed by ids or names a client chose) holds under `key` as its own property,
 * or undefined. Plain indexing would find what every object inherits: `map['__proto__']` is `Object.prototype`
 * (whose fields an edit would then set for the whole process), `map['toString']` a function.
 */
export function own<T>(map: Record<string, T> | undefined, key: string): T | undefined {
  return map && Object.hasOwn(map, key) ? map[key] : undefined;
}
