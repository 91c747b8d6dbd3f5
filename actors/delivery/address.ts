import { isIPv4, isIPv6 } from 'node:net';

/**
 * Which IP addresses a webhook may not reach: loopback, private, link-local (the cloud metadata address
 * 169.254.169.254 among them), CGNAT, unique-local, unspecified, multicast, documentation and other reserved
 * ranges, in IPv4 and IPv6, including IPv6 forms that carry an IPv4 address (mapped, compatible, SIIT
 * translated, NAT64, 6to4, Teredo), which reach that IPv4 address.
 */

/** [network, prefix length] of IPv4 ranges no webhook may reach. */
const V4_BLOCKED: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network", 0.0.0.0 connects to the host itself
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // TEST-NET-1
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // TEST-NET-2
  ['203.0.113.0', 24], // TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];

const v4Ranges = V4_BLOCKED.map(([net, bits]) => {
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return { base: (v4ToInt(net)! & mask) >>> 0, mask };
});

function v4ToInt(ip: string): number | null {
  const parts = ip.split('.');
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null;
    n = n * 256 + Number(p);
  }
  return n >>> 0;
}

function v4IntBlocked(n: number): boolean {
  return v4Ranges.some((r) => ((n & r.mask) >>> 0) === r.base);
}

/** The eight 16-bit groups of an IPv6 address (zone id dropped), or null. */
export function v6Groups(ip: string): number[] | null {
  let s = ip.replace(/^\[|\]$/g, '');
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  if (!isIPv6(s)) return null;
  // A trailing dotted quad stands for the last two groups.
  // Found by position, not a regular expression: `isIPv6` passed, so a dot can only be in the last group.
  const last = s.lastIndexOf(':') + 1;
  if (s.includes('.', last)) {
    const n = v4ToInt(s.slice(last));
    if (n === null) return null;
    s = s.slice(0, last) + `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = s.includes('::') ? s.split('::') : [s, null];
  const h = head ? head.split(':') : [];
  const t = tail === null ? [] : tail ? tail.split(':') : [];
  const fill = tail === null ? 0 : 8 - h.length - t.length;
  const groups = [...h, ...Array(fill).fill('0'), ...t].map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => g >= 0 && g <= 0xffff) ? groups : null;
}

/** The IPv4 address an IPv6 address reaches, when it embeds one, as a 32-bit number. */
function embeddedV4(g: number[]): number | null {
  const last32 = ((g[6] << 16) | g[7]) >>> 0;
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 5) && g[5] === 0xffff) return last32; // ::ffff:a.b.c.d mapped
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return last32; // ::ffff:0:a.b.c.d translated (SIIT)
  if (zero(0, 6) && last32 > 1) return last32; // ::a.b.c.d compatible (deprecated, still routed by some stacks)
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return last32; // 64:ff9b::/96 NAT64
  if (g[0] === 0x2002) return ((g[1] << 16) | g[2]) >>> 0; // 6to4
  if (g[0] === 0x2001 && g[1] === 0) return ~last32 >>> 0; // Teredo: the client's address, inverted
  return null;
}

function v6Blocked(g: number[]): boolean {
  const v4 = embeddedV4(g);
  if (v4 !== null) return v4IntBlocked(v4);
  if (g[0] >>> 8 === 0) return true; // ::/8: ::, ::1 and the reserved rest
  if ((g[0] & 0xfe00) === 0xfc00) return true; // fc00::/7 unique local
  if ((g[0] & 0xffc0) === 0xfe80) return true; // fe80::/10 link-local
  if ((g[0] & 0xffc0) === 0xfec0) return true; // fec0::/10 site-local (deprecated)
  if (g[0] >>> 8 === 0xff) return true; // multicast
  if (g[0] === 0x2001 && g[1] === 0x0db8) return true; // documentation
  if (g[0] === 0x0100 && g[1] === 0 && g[2] === 0 && g[3] === 0) return true; // 100::/64 discard
  if (g[0] === 0x2001 && (g[1] & 0xfff0) === 0x0010) return true; // ORCHID
  if (g[0] === 0x2001 && g[1] === 0x0002 && g[2] === 0) return true; // benchmarking
  if (g[0] === 0x0064 && g[1] === 0xff9b && g[2] === 0x0001) return true; // 64:ff9b:1::/48 local-use NAT64
  return false;
}

/**
 * Whether `ip` (IPv4 or IPv6, brackets and zone ids allowed) is one no webhook may reach. Anything that is not
 * an IP address counts as blocked: callers check resolved addresses, never names.
 */
export function isBlockedAddress(ip: string): boolean {
  if (isIPv4(ip)) return v4IntBlocked(v4ToInt(ip)!);
  const g = v6Groups(ip);
  return g === null ? true : v6Blocked(g);
}
