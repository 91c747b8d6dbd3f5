/**
 * What `JSON.parse` accepts in a body or frame and the platform could not store as it was sent (I-JSON, RFC 7493,
 * forbids both: lone surrogates, and numbers a double cannot hold). Refused where
 * the JSON is parsed (the edge's body parser, the socket gateway's `parseJson`), so every route and frame is
 * covered at once, rather than each field's check.
 *
 * A JSON `\uXXXX` escape can spell a lone UTF-16 surrogate (`"\ud800"`), which is no Unicode character:
 * every encoder on the way to the store (UTF-8 in msgpackr, BSON, the JSON lines of the read models) writes it
 * as U+FFFD, three bytes. The 2xx would acknowledge a string other than the one read back later, and a
 * length check would have counted one unit where three characters are stored (60 of them passed a
 * 128-character limit and were stored as 180).
 */
export const LONE_SURROGATE = 'holds a lone surrogate (U+D800 to U+DFFF outside a pair), which is not Unicode text';

/**
 * A JSON number past a double's range (`1e309`, `-1e400`, 400 nines) parses to Infinity, which JSON and the
 * store's encoders write as null: stored, it was not what was sent, and in a merge patch (real-time config
 * variables) null even removes the key.
 */
export const NUMBER_OUT_OF_RANGE = 'holds a number out of range (larger in size than 1.7976931348623157e308, the largest double), which is not finite';

/**
 * A surrogate's escape, `\uD800` to `\uDFFF`. Text decoded from bytes never holds a lone surrogate (a decoder
 * refuses or replaces bytes that are not UTF-8), so one in a parsed string came from such an escape: without
 * one in the text, which is what nearly every body and frame is, the parsed value is not walked at all. A
 * match is not proof (the pair `\ud83d\ude00` is an emoji; `\\ud800` is an escaped backslash): the walk decides.
 */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * What a number past a double's range must have. Of size 1.8e308 or more, written with d digits before its
 * point and the exponent e, it has d + e >= 309: an exponent of three digits or more, or (e < 100) 210 digits
 * or more in a row. Bodies and frames without either are not walked for numbers. The lookbehind has a run of
 * digits tried once, from its start, not again from each of its digits: linear whatever the text.
 */
const LARGE_NUMBER = /\d[eE][+-]?\d{3}|(?<!\d)\d{210}/;

/** `String.prototype.isWellFormed` (ES2024, Node 20): not in the ES2022 library the sources compile against. */
const wellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

/**
 * Why `value`, parsed from the JSON `text`, would not be stored as sent (`LONE_SURROGATE`: a string or a key
 * holds a lone surrogate; `NUMBER_OUT_OF_RANGE`: a number is not finite), or null when it would. Cheap when
 * the text holds neither a surrogate escape nor a large number's digits: two scans of the text, nothing walked.
 */
export function unstorableJson(text: string, value: unknown): string | null {
  const strings = SURROGATE_ESCAPE.test(text);
  const numbers = LARGE_NUMBER.test(text);
  if (!strings && !numbers) return null;
  // A stack, not recursion: callers bound the depth (`json-depth.ts`), but this need not rely on them.
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (strings && !wellFormed(v)) return LONE_SURROGATE;
    } else if (typeof v === 'number') {
      if (numbers && !Number.isFinite(v)) return NUMBER_OUT_OF_RANGE;
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (v !== null && typeof v === 'object') {
      for (const key of Object.keys(v)) {
        if (strings && !wellFormed(key)) return LONE_SURROGATE;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return null;
}
