/**
 * How many characters (Unicode code points) a string holds, as people and the limits in the docs count them:
 * `String.length` counts UTF-16 units, two for each character outside the Basic Multilingual Plane (an emoji).
 * A lone surrogate counts as one. Allocates nothing.
 */
export function characters(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}
