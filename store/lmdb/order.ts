import { compare } from 'mingo/util';
import { valueAt } from '../cursor.js';
import type { Doc, Sort } from '../types.js';

/**
 * A comparator for a MongoDB sort document. Missing sorts as null (tied with it, as in MongoDB; mingo's
 * own sort would put missing first and so disagree with the keyset conditions of `page`). Values of
 * different types follow mingo's cross-type order, which matches MongoDB's for scalars.
 */
export function compareBy(sort: Sort): (a: Doc, b: Doc) => number {
  const fields = Object.entries(sort);
  return (a, b) => {
    for (const [field, dir] of fields) {
      const order = compare(valueAt(a, field) ?? null, valueAt(b, field) ?? null);
      if (order !== 0) return dir === -1 ? -order : order;
    }
    return 0;
  };
}
