/**
 * A host as a URL's authority writes it: an IPv6 literal (`::1`, `::`) in brackets, as RFC 3986 has it, since
 * `http://::1:8080` is no URL at all; a name or an IPv4 address as it is.
 */
export function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}
