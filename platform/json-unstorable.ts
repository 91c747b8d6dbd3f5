/**
 * What `JSON.parse` accepts in a body or frame and the platform could not store as it was sent. Refused where
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
 * A surrogate's escape, `\uD800` to `\uDFFF`. Text decoded from bytes never holds a lone surrogate (a decoder
 * refuses or replaces bytes that are not UTF-8), so one in a parsed string came from such an escape: without
 * one in the text, which is what nearly every body and frame is, the parsed value is not walked at all. A
 * match is not proof (the pair `\ud83d\ude00` is an emoji; `\\ud800` is an escaped backslash): the walk decides.
 */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** `String.prototype.isWellFormed` (ES2024, Node 20): not in the ES2022 library the sources compile against. */
const wellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

/**
 * Why `value`, parsed from the JSON `text`, would not be stored as sent (`LONE_SURROGATE`: a string or a key
 * holds a lone surrogate), or null when it would. Cheap when the text holds no surrogate escape: one scan
 * of the text, nothing walked.
 */
export function unstorableJson(text: string, value: unknown): string | null {
  if (!SURROGATE_ESCAPE.test(text)) return null;
  // A stack, not recursion: callers bound the depth (`json-depth.ts`), but this need not rely on them.
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (!wellFormed(v)) return LONE_SURROGATE;
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (v !== null && typeof v === 'object') {
      for (const key of Object.keys(v)) {
        if (!wellFormed(key)) return LONE_SURROGATE;
        stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return null;
}
