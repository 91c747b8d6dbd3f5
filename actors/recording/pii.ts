/**
 * What counts as personal data in a caller's words or keys (docs/recordings.md): numbers that parse as a
 * card number (13 to 19 digits passing Luhn) or a phone number (7 to 15 digits otherwise), e-mail
 * addresses (written or spoken: "jane at example dot com"), dates of birth (a date said with "born" or
 * "birth", or 8 keyed digits that form a past date), and values the agent's functions marked personal.
 */
import type { Redaction } from './layout.js';

// A Map, not an object literal: a word such as "constructor" must not read as a digit from the prototype.
const WORD_DIGITS = new Map(Object.entries({ zero: '0', oh: '0', o: '0', one: '1', two: '2', three: '3', four: '4', five: '5', six: '6', seven: '7', eight: '8', nine: '9' }));

/** Luhn's check (card numbers). */
export function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

/** A keyed or spoken run of digits as a kind of personal data, or null. */
export function digitsKind(digits: string): Redaction['kind'] | null {
  if (digits.length >= 13 && digits.length <= 19 && luhn(digits)) return 'card_number';
  if (digits.length === 8 && isPastDate(digits)) return 'date_of_birth';
  if (digits.length >= 7 && digits.length <= 15) return 'phone_number';
  return null;
}

function isPastDate(d: string): boolean {
  const asDate = (y: number, m: number, day: number) => y >= 1900 && y <= new Date().getUTCFullYear() && m >= 1 && m <= 12 && day >= 1 && day <= 31;
  const n = (a: number, b: number) => Number(d.slice(a, b));
  return asDate(n(4, 8), n(2, 4), n(0, 2)) || asDate(n(4, 8), n(0, 2), n(2, 4)) || asDate(n(0, 4), n(4, 6), n(6, 8));
}

/** What every spoken address has: a cheap test before the pattern. */
const SPOKEN_DOT = / dot /i;
const SPOKEN_EMAIL = /\b\w+ at \w+(?: \w+)? dot (?:com|org|net|co|uk|io|edu|gov)\b/i;
const MONTHS = /\b(january|february|march|april|may|june|july|august|september|october|november|december|\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4})\b/i;
const BIRTH = /\b(born|birth|birthday|dob)\b/i;

const LOCAL = /[A-Za-z0-9._%+-]/;
const DOMAIN = /[A-Za-z0-9.-]/;
const LETTER = /[A-Za-z]/;

/**
 * Whether the text holds an e-mail address (`local@domain.tld`, a TLD of two letters or more). Scanned by hand
 * from each `@`, outwards, instead of an unanchored regular expression, which backtracks over every start
 * position (quadratic in the text: `test/regex.test.ts`).
 */
export function hasEmail(text: string): boolean {
  for (let at = text.indexOf('@'); at >= 0; at = text.indexOf('@', at + 1)) {
    if (at === 0 || !LOCAL.test(text[at - 1])) continue;
    let end = at + 1;
    while (end < text.length && DOMAIN.test(text[end])) end++;
    // As the pattern `[domain chars]+\.[A-Za-z]{2,}` did: some dot after at least one domain character,
    // followed by two letters (what comes after them does not matter, the pattern was not anchored).
    for (let d = at + 2; d + 2 < end; d++) {
      if (text[d] === '.' && LETTER.test(text[d + 1]) && LETTER.test(text[d + 2])) return true;
    }
  }
  return false;
}

/** The kinds of personal data in a recognised utterance (its digits read word by word too). */
export function textKinds(text: string, marked: string[] = []): Redaction['kind'][] {
  const kinds = new Set<Redaction['kind']>();
  for (const run of digitRuns(text)) {
    const k = digitsKind(run);
    if (k) kinds.add(k);
  }
  if (hasEmail(text) || (SPOKEN_DOT.test(text) && SPOKEN_EMAIL.test(text))) kinds.add('email');
  if (BIRTH.test(text) && (MONTHS.test(text) || /\d/.test(text))) kinds.add('date_of_birth');
  if (marked.length > 0) {
    const lower = text.toLowerCase();
    if (marked.some((v) => v.trim() && lower.includes(v.trim().toLowerCase()))) kinds.add('marked');
  }
  return [...kinds];
}

/**
 * Runs of digits in a text, written ("4111 1111") or spoken ("four one one one"), separators ignored. Punctuation
 * around a number is not part of it (typed text: "(020) 7946 0958", "+44 7700 900123", "call 07700900123."), and a
 * sentence's end (`.`, `!`, `?`, `;`, `:` after the digits) ends the run, as a word does.
 */
export function digitRuns(text: string): string[] {
  // Scanned by hand, a token at a time: every transcript row a key without `pii` reads passes through here, on
  // both sides of each turn, so no regular expression or copy of the text per token.
  const runs: string[] = [];
  let cur = '';
  const n = text.length;
  let i = 0;
  while (i < n) {
    if (isSeparator(text.charCodeAt(i))) {
      i++;
      continue;
    }
    let j = i + 1;
    while (j < n && !isSeparator(text.charCodeAt(j))) j++;
    let a = i;
    let b = j;
    while (a < b && OPENING.has(text.charCodeAt(a))) a++;
    while (b > a && CLOSING.has(text.charCodeAt(b - 1))) b--;
    const piece = digitsIn(text, a, b) ?? (b - a <= MAX_DIGIT_WORD && DIGIT_WORD_STARTS.has(text.charCodeAt(a) | 0x20) ? WORD_DIGITS.get(text.slice(a, b).toLowerCase()) : undefined);
    if (piece === undefined) {
      if (cur) runs.push(cur);
      cur = '';
    } else {
      cur += piece;
      if (cur && endsSentence(text, i, j)) {
        runs.push(cur);
        cur = '';
      }
    }
    i = j;
  }
  if (cur) runs.push(cur);
  return runs;
}

/** The digits of `text[a, b)` when it holds only digits and hyphens (and something), else undefined. */
function digitsIn(text: string, a: number, b: number): string | undefined {
  if (a === b) return undefined;
  let out = '';
  for (let k = a; k < b; k++) {
    const c = text.charCodeAt(k);
    if (c >= 48 && c <= 57) out += text[k];
    else if (c !== 45) return undefined;
  }
  return out;
}

/** Whether the token `text[i, j)` ends a sentence: `.`, `!`, `?`, `;` or `:`, then only closing brackets and quotes. */
function endsSentence(text: string, i: number, j: number): boolean {
  let k = j - 1;
  while (k >= i && QUOTES_AND_BRACKETS.has(text.charCodeAt(k))) k--;
  return k >= i && STOPS.has(text.charCodeAt(k));
}

/** What splits tokens: a comma, or whitespace as `\s` has it. */
function isSeparator(c: number): boolean {
  if (c === 32 || c === 44 || (c >= 9 && c <= 13)) return true;
  if (c < 0xa0) return false;
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

const codes = (chars: string) => new Set([...chars].map((ch) => ch.charCodeAt(0)));
/** What may open or close a number in typed text without being part of it. */
const OPENING = codes('(["\'+');
const QUOTES_AND_BRACKETS = codes(')]"\'');
const STOPS = codes('.!?;:');
const CLOSING = new Set([...QUOTES_AND_BRACKETS, ...STOPS]);
const MAX_DIGIT_WORD = 5;
/** The first letters of the digit words, lower case (a letter's code with 0x20 set). */
const DIGIT_WORD_STARTS = codes([...WORD_DIGITS.keys()].map((w) => w[0]).join(''));

/** What a masked transcript field reads instead of the personal data it held (redacted views). */
export const REDACTED = '[redacted]';

/** A transcript line with its personal data masked (redacted views): the whole utterance when it holds any. */
export function maskText(text: string, marked: string[] = []): string {
  return text && textKinds(text, marked).length ? REDACTED : text;
}
