const strict = new TextDecoder('utf-8', { fatal: true });

/**
 * `bytes` as UTF-8 text, or null when they are not valid UTF-8: what a client sent is refused (or kept as it
 * came) rather than read with its bad bytes replaced, which would store text nobody sent.
 */
export function utf8(bytes: Uint8Array): string | null {
  try {
    return strict.decode(bytes);
  } catch {
    return null;
  }
}
