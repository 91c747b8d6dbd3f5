/**
 * Text analysis for the offline responder's retrieval: tokenizing (lowercase, Unicode letters/digits),
 * English stop words and a Porter stemmer. Deterministic and dependency-free.
 */

/** English stop words (function words, pronouns, auxiliaries and their common contractions). */
export const STOP_WORDS: ReadonlySet<string> = new Set([
  'a', 'about', 'above', 'after', 'again', 'against', 'all', 'am', 'an', 'and', 'any', 'are', 'aren\'t', 'as',
  'at', 'be', 'because', 'been', 'before', 'being', 'below', 'between', 'both', 'but', 'by', 'can', 'can\'t',
  'cannot', 'could', 'couldn\'t', 'did', 'didn\'t', 'do', 'does', 'doesn\'t', 'doing', 'don\'t', 'down',
  'during', 'each', 'few', 'for', 'from', 'further', 'had', 'hadn\'t', 'has', 'hasn\'t', 'have', 'haven\'t',
  'having', 'he', 'he\'d', 'he\'ll', 'he\'s', 'her', 'here', 'here\'s', 'hers', 'herself', 'him', 'himself',
  'his', 'how', 'how\'s', 'i', 'i\'d', 'i\'ll', 'i\'m', 'i\'ve', 'if', 'in', 'into', 'is', 'isn\'t', 'it',
  'it\'s', 'its', 'itself', 'just', 'let\'s', 'me', 'might', 'more', 'most', 'must', 'mustn\'t', 'my', 'myself',
  'no', 'nor', 'not', 'now', 'of', 'off', 'on', 'once', 'only', 'or', 'other', 'ought', 'our', 'ours',
  'ourselves', 'out', 'over', 'own', 'please', 'same', 'shall', 'shan\'t', 'she', 'she\'d', 'she\'ll', 'she\'s',
  'should', 'shouldn\'t', 'so', 'some', 'such', 'than', 'that', 'that\'s', 'the', 'their', 'theirs', 'them',
  'themselves', 'then', 'there', 'there\'s', 'these', 'they', 'they\'d', 'they\'ll', 'they\'re', 'they\'ve',
  'this', 'those', 'through', 'to', 'too', 'under', 'until', 'up', 'very', 'was', 'wasn\'t', 'we', 'we\'d',
  'we\'ll', 'we\'re', 'we\'ve', 'were', 'weren\'t', 'what', 'what\'s', 'when', 'when\'s', 'where', 'where\'s',
  'which', 'while', 'who', 'who\'s', 'whom', 'why', 'why\'s', 'will', 'with', 'won\'t', 'would', 'wouldn\'t',
  'yes', 'you', 'you\'d', 'you\'ll', 'you\'re', 'you\'ve', 'your', 'yours', 'yourself', 'yourselves',
  // fragments of contractions written without an apostrophe or split by it
  's', 't', 'd', 'll', 're', 've', 'm', 'dont', 'cant', 'wont', 'im', 'ive', 'id', 'youre', 'thats', 'whats',
]);

/** Lowercase words: runs of Unicode letters/digits, keeping inner apostrophes ("don't"). */
export function words(text: string): string[] {
  const normalized = text.normalize('NFC').toLowerCase().replace(/[\u2018\u2019\u02bc]/g, "'");
  return normalized.match(/[\p{L}\p{N}]+(?:'[\p{L}\p{N}]+)*/gu) ?? [];
}

/** One analyzed word: the word as written (lowercase, apostrophes removed) and its term. */
export interface AnalyzedWord {
  word: string;
  term: string;
}

/**
 * The words of a text that carry meaning, each with its term: stop words, possessives and apostrophes
 * removed, stemmed. A word is dropped when it or its stem is a stop word.
 */
export function analyze(text: string): Array<Readonly<AnalyzedWord>> {
  const out: Array<Readonly<AnalyzedWord>> = [];
  for (const word of words(text)) {
    const analyzed = analyzeWord(word);
    if (analyzed) out.push(analyzed);
  }
  return out;
}

/**
 * Words analyzed before, with their analysis (null: dropped), oldest first. Every turn analyzes its text twice
 * (the responder's retrieval, the search postings) and a language's common words are few, so most words are
 * found here; bounded in count and in word length, the oldest entry going first.
 */
const analyzedWords = new Map<string, Readonly<AnalyzedWord> | null>();
const ANALYZED_WORDS = 20_000;
const ANALYZED_WORD_CHARS = 32;

function analyzeWord(word: string): Readonly<AnalyzedWord> | null {
  let analyzed = analyzedWords.get(word);
  if (analyzed !== undefined) return analyzed;
  analyzed = analyzeUncached(word);
  if (word.length <= ANALYZED_WORD_CHARS) {
    if (analyzedWords.size >= ANALYZED_WORDS) analyzedWords.delete(analyzedWords.keys().next().value as string);
    analyzedWords.set(word, analyzed);
  }
  return analyzed;
}

function analyzeUncached(word: string): Readonly<AnalyzedWord> | null {
  if (STOP_WORDS.has(word)) return null;
  const bare = word.replace(/'s$/, '').replace(/'/g, '');
  if (!bare || STOP_WORDS.has(bare)) return null;
  const term = stem(bare);
  if (!term || STOP_WORDS.has(term)) return null;
  return Object.freeze({ word: bare, term });
}

/**
 * The analyzed terms of a text: words, without stop words, possessives and apostrophes removed, stemmed.
 * The result never contains a stop word.
 */
export function tokenize(text: string): string[] {
  return analyze(text).map((a) => a.term);
}

// ---- Porter stemmer (M. F. Porter, 1980), applied until it reaches a fixed point ----

/**
 * Whether the letter at `i` is a consonant: a vowel is a, e, i, o, u, and a y after a consonant. A run of y's
 * alternates from the letter before it (a y that starts the word is a consonant): read from where the run starts,
 * not by recursion, whose depth was the run's length (a long run of y's overflowed the stack).
 */
function isConsonant(w: string, i: number): boolean {
  const c = w[i];
  if (c === 'a' || c === 'e' || c === 'i' || c === 'o' || c === 'u') return false;
  if (c !== 'y') return true;
  let j = i - 1;
  while (j >= 0 && w[j] === 'y') j--;
  // w[j] is the letter before the run (none: the run starts the word, and its first y is a consonant).
  const first = j < 0 ? true : !isConsonant(w, j);
  return (i - j) % 2 === 1 ? first : !first;
}

/** The measure m of a stem: the number of VC sequences in [C](VC)^m[V]. */
function measure(s: string): number {
  let m = 0;
  let i = 0;
  const n = s.length;
  while (i < n && isConsonant(s, i)) i++;
  while (i < n) {
    while (i < n && !isConsonant(s, i)) i++;
    if (i >= n) break;
    while (i < n && isConsonant(s, i)) i++;
    m++;
  }
  return m;
}

function hasVowel(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (!isConsonant(s, i)) return true;
  return false;
}

function endsDoubleConsonant(s: string): boolean {
  const n = s.length;
  return n >= 2 && s[n - 1] === s[n - 2] && isConsonant(s, n - 1);
}

/** *o: the stem ends consonant-vowel-consonant, the last consonant not w, x or y. */
function endsCvc(s: string): boolean {
  const n = s.length;
  if (n < 3) return false;
  if (!isConsonant(s, n - 3) || isConsonant(s, n - 2) || !isConsonant(s, n - 1)) return false;
  const c = s[n - 1];
  return c !== 'w' && c !== 'x' && c !== 'y';
}

/** Replaces the first (longest) listed suffix the word ends with, when the remaining stem satisfies `cond`. */
function replaceSuffix(w: string, rules: ReadonlyArray<readonly [string, string]>, cond: (stem: string) => boolean): string {
  for (const [suffix, replacement] of rules) {
    if (w.endsWith(suffix)) {
      const s = w.slice(0, w.length - suffix.length);
      return cond(s) ? s + replacement : w;
    }
  }
  return w;
}

const STEP2: ReadonlyArray<readonly [string, string]> = [
  ['ational', 'ate'], ['tional', 'tion'], ['enci', 'ence'], ['anci', 'ance'], ['izer', 'ize'], ['bli', 'ble'],
  ['alli', 'al'], ['entli', 'ent'], ['eli', 'e'], ['ousli', 'ous'], ['ization', 'ize'], ['ation', 'ate'],
  ['ator', 'ate'], ['alism', 'al'], ['iveness', 'ive'], ['fulness', 'ful'], ['ousness', 'ous'], ['aliti', 'al'],
  ['iviti', 'ive'], ['biliti', 'ble'], ['logi', 'log'],
].sort((a, b) => b[0].length - a[0].length) as Array<[string, string]>;

const STEP3: ReadonlyArray<readonly [string, string]> = [
  ['icate', 'ic'], ['ative', ''], ['alize', 'al'], ['iciti', 'ic'], ['ical', 'ic'], ['ful', ''], ['ness', ''],
].sort((a, b) => b[0].length - a[0].length) as Array<[string, string]>;

const STEP4 = [
  'al', 'ance', 'ence', 'er', 'ic', 'able', 'ible', 'ant', 'ement', 'ment', 'ent', 'ion', 'ou', 'ism', 'ate',
  'iti', 'ous', 'ive', 'ize',
].sort((a, b) => b.length - a.length);

function porter(word: string): string {
  let w = word;
  if (w.length <= 2) return w;

  // Step 1a: plurals.
  if (w.endsWith('sses')) w = w.slice(0, -2);
  else if (w.endsWith('ies')) w = w.slice(0, -2);
  else if (w.endsWith('ss')) {
    /* unchanged */
  } else if (w.endsWith('s')) w = w.slice(0, -1);

  // Step 1b: -ed, -ing.
  if (w.endsWith('eed')) {
    if (measure(w.slice(0, -3)) > 0) w = w.slice(0, -1);
  } else {
    let stripped: string | null = null;
    if (w.endsWith('ed') && hasVowel(w.slice(0, -2))) stripped = w.slice(0, -2);
    else if (w.endsWith('ing') && hasVowel(w.slice(0, -3))) stripped = w.slice(0, -3);
    if (stripped !== null) {
      w = stripped;
      if (w.endsWith('at') || w.endsWith('bl') || w.endsWith('iz')) w += 'e';
      else if (endsDoubleConsonant(w) && !/[lsz]$/.test(w)) w = w.slice(0, -1);
      else if (measure(w) === 1 && endsCvc(w)) w += 'e';
    }
  }

  // Step 1c: y -> i.
  if (w.endsWith('y') && hasVowel(w.slice(0, -1))) w = w.slice(0, -1) + 'i';

  // Steps 2 and 3: double and single suffixes, when m > 0.
  w = replaceSuffix(w, STEP2, (s) => measure(s) > 0);
  w = replaceSuffix(w, STEP3, (s) => measure(s) > 0);

  // Step 4: remove suffixes when m > 1 (-ion only after s or t).
  for (const suffix of STEP4) {
    if (w.endsWith(suffix)) {
      const s = w.slice(0, w.length - suffix.length);
      if (measure(s) > 1 && (suffix !== 'ion' || /[st]$/.test(s))) w = s;
      break;
    }
  }

  // Step 5a: final -e.
  if (w.endsWith('e')) {
    const s = w.slice(0, -1);
    const m = measure(s);
    if (m > 1 || (m === 1 && !endsCvc(s))) w = s;
  }
  // Step 5b: -ll -> -l when m > 1.
  if (measure(w) > 1 && endsDoubleConsonant(w) && w.endsWith('l')) w = w.slice(0, -1);
  return w;
}

/**
 * The longest word stemmed; longer ones are their own term. English words are far shorter, and each of the
 * algorithm's passes reads the word again (a text that is one run of letters, a function's or a caller's, is
 * analyzed on the shared edge, turn and projection paths).
 */
const MAX_STEMMED_CHARS = 64;

/**
 * The stem of a lowercase word: the Porter algorithm, repeated until the word no longer changes so that
 * `stem(stem(w)) === stem(w)` ("opening", "opens", "opened" -> "open"; "delivery", "deliveries" -> "deliveri").
 * Words with no ASCII letter (numbers, other scripts), and words longer than MAX_STEMMED_CHARS, are returned unchanged.
 */
export function stem(word: string): string {
  if (word.length > MAX_STEMMED_CHARS || !/[a-z]/.test(word)) return word;
  let current = word;
  for (let i = 0; i < 50; i++) {
    const next = porter(current);
    if (next === current) return current;
    current = next;
  }
  return current;
}
