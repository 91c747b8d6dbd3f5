/**
 * Whether two stored values are equal as data: the same primitive (NaN equal to itself), arrays of equal items,
 * dates of one time, byte arrays of the same bytes, or objects with the same own keys and equal values.
 *
 * Not mingo's `isEqual`: that one takes an object whose own `constructor` and `toString` are not Object's for an
 * instance of a class and calls its `toString`, so a stored value with keys named so (a real-time config's
 * variables `{constructor: "a", toString: "b"}`) threw on every later update of the record.
 */
export function dataEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return a !== a && b !== b;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((v, i) => dataEqual(v, b[i]));
  if (Array.isArray(b)) return false;
  if (a instanceof Date || b instanceof Date) return a instanceof Date && b instanceof Date && a.getTime() === b.getTime();
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) {
    if (!ArrayBuffer.isView(a) || !ArrayBuffer.isView(b)) return false;
    return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  }
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  return ka.every((k) => Object.hasOwn(rb, k) && dataEqual(ra[k], rb[k]));
}
