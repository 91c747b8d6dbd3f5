/**
 * The content and transfer codings of a request, as both HTTP ports read them. Neither undoes a coding other
 * than chunked: the edge (`gateway/edge/body-headers.ts`) and the socket gateway (`gateway/socket/framing.ts`,
 * `http.ts`) refuse a body sent with one, rather than parse its coded bytes as JSON.
 */

/**
 * The first coding of a header's list (`gzip, chunked`) that is not `allowed`, in lower case; null when none
 * is. Several lines of the header are one list (RFC 9110 5.3): give them joined with commas.
 */
export function otherCoding(value: string | undefined, allowed: string): string | null {
  if (value === undefined) return null;
  for (const part of value.split(',')) {
    const coding = part.trim().toLowerCase();
    if (coding !== '' && coding !== allowed) return coding;
  }
  return null;
}
