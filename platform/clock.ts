/** Wall-clock time as an ISO 8601 string, the form every record and response uses. */
export const nowIso = (): string => isoOf(Date.now());

// `toISOString` allocates a Date and formats every field; a turn formats two times in the same second.
let cachedSecond = NaN;
let cachedPrefix = '';

/**
 * `ms` (milliseconds since the epoch) as `new Date(ms).toISOString()` writes it, with the part up to the
 * seconds kept from the last call in the same second.
 */
export function isoOf(ms: number): string {
  const second = Math.floor(ms / 1000);
  const whole = Number.isInteger(ms);
  if (whole && second === cachedSecond) {
    const milli = ms - second * 1000;
    return `${cachedPrefix}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
  }
  const full = new Date(ms).toISOString();
  if (whole) {
    cachedSecond = second;
    // Everything before the milliseconds and the `Z` (years past 9999 make the prefix longer).
    cachedPrefix = full.slice(0, -4);
  }
  return full;
}
