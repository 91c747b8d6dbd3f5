/**
 * Close misspellings: whether two words are at most one edit apart in the Damerau-Levenshtein sense (one
 * insertion, deletion, substitution, or swap of two adjacent letters). Linear in the words' length: the
 * offline responder compares a word it does not know against the knowledge base's words.
 */

/** The shortest word a misspelling is looked for in: shorter words are too often one edit from another word. */
export const MIN_FUZZY_LENGTH = 5;

/**
 * The shortest word a swap of two adjacent letters is looked for in (`opne` for `open`, `prak` for `park`): a
 * swap keeps a word's letters, so it is seldom another word, where a substitution (`hour` for `your`) often is.
 */
export const MIN_SWAP_LENGTH = 3;

/** True when `a` is `b` with two adjacent letters swapped. */
export function swappedLetters(a: string, b: string): boolean {
  if (a.length !== b.length || a === b) return false;
  let i = 0;
  while (a[i] === b[i]) i++;
  return a[i] === b[i + 1] && a[i + 1] === b[i] && a.slice(i + 2) === b.slice(i + 2);
}

/** True when `a` and `b` differ by at most one insertion, deletion, substitution or adjacent swap. */
export function withinOneEdit(a: string, b: string): boolean {
  if (a === b) return true;
  const la = a.length;
  const lb = b.length;
  if (Math.abs(la - lb) > 1) return false;
  let i = 0;
  while (i < la && i < lb && a[i] === b[i]) i++;
  if (la === lb) {
    // Substitution at i, or a swap of i and i + 1; the rest must be equal.
    if (a.slice(i + 1) === b.slice(i + 1)) return true;
    return a[i] === b[i + 1] && a[i + 1] === b[i] && a.slice(i + 2) === b.slice(i + 2);
  }
  // One extra letter at i in the longer word.
  return la > lb ? a.slice(i + 1) === b.slice(i) : a.slice(i) === b.slice(i + 1);
}
