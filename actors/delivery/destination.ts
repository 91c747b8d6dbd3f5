import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { isBlockedAddress } from './address.js';
import { BoundedLookups, DELIVERY_LOOKUP_LIMITS } from './lookup.js';

/** Why a webhook URL was refused. */
export type DestinationProblem = 'invalid' | 'scheme' | 'credentials' | 'private' | 'unresolvable';

/** The longest URL an endpoint may have. */
export const MAX_URL_LENGTH = 2048;

/** A URL's destination refused by policy: the delivery is not attempted. */
export class PrivateDestinationError extends Error {
  readonly code = 'EPRIVATE';
  constructor(readonly address: string) {
    super(`destination address ${address} is loopback or private`);
    this.name = 'PrivateDestinationError';
  }
}

/**
 * Parses an endpoint URL: http or https, no user name or password (headers carry credentials), at most
 * `MAX_URL_LENGTH` characters. Returns the URL or the problem.
 */
export function parseWebhookUrl(raw: string): URL | DestinationProblem {
  if (raw.length > MAX_URL_LENGTH) return 'invalid';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'invalid';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'scheme';
  if (url.username || url.password) return 'credentials';
  if (!url.hostname) return 'invalid';
  return url;
}

/** The host of a parsed URL as an address or name (IPv6 brackets removed). */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}

/** How long a check waits for DNS before it judges the name as one that does not resolve now. */
const CHECK_LOOKUP_MS = 2000;

/**
 * The URL checks' lookups: one in flight for the whole thread (with the deliveries' two, 3 of libuv's 4 pool
 * threads at most; see lookup.ts), cached as deliveries' are.
 */
const checkLookups = new BoundedLookups({ ...DELIVERY_LOOKUP_LIMITS, maxInFlight: 1, waitMs: CHECK_LOOKUP_MS });

/** The deliveries' lookups of this thread: 2 in flight in all, 1 per account (lookup.ts). */
export const deliveryLookups = new BoundedLookups(DELIVERY_LOOKUP_LIMITS);

/** Names that never resolve (RFC 6761 `.invalid`) and names that always mean this host (`localhost`). */
const NEVER_RESOLVES = /(?:^|\.)invalid\.?$/i;
const LOCALHOST = /(?:^|\.)localhost\.?$/i;

/**
 * Checks where a URL leads: every address its host resolves to must be public unless `allowPrivate`. Used when
 * an endpoint is created or its URL changed; a delivery checks again at connect time (`guardedLookup`),
 * since DNS answers change.
 *
 * A name that does not resolve now is accepted (docs/webhooks.md): DNS at the moment an endpoint is saved does
 * not judge a URL (a platform without outside DNS, a name published later, split-horizon DNS), and accepting it
 * lets nothing through, as each delivery resolves and checks the name again before it connects (an attempt
 * whose name does not resolve fails as a network error and is retried). Only names that can never resolve
 * (`.invalid`) are refused as unresolvable, and `localhost` names as private.
 */
export async function checkDestination(raw: string, allowPrivate: boolean): Promise<DestinationProblem | null> {
  const url = parseWebhookUrl(raw);
  if (typeof url === 'string') return url;
  const host = hostOf(url);
  if (isIP(host)) return !allowPrivate && isBlockedAddress(host) ? 'private' : null;
  if (NEVER_RESOLVES.test(host)) return 'unresolvable';
  if (LOCALHOST.test(host)) return allowPrivate ? null : 'private';
  let addresses: LookupAddress[];
  try {
    addresses = await checkLookups.lookup(host, '');
  } catch {
    return null;
  }
  if (!allowPrivate && addresses.some((a) => isBlockedAddress(a.address))) return 'private';
  return null;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for `http.request` that resolves the name with `resolve` (bounded and cached: lookup.ts), refuses the connection when any answer is a blocked
 * address (unless `allowPrivate`), and hands the socket exactly the addresses it checked: the connection
 * goes where the check looked, so a DNS answer that changes between check and connect (rebinding) cannot
 * reach a private address.
 */
export function guardedLookup(allowPrivate: boolean, resolve: (hostname: string) => Promise<LookupAddress[]>) {
  return (hostname: string, options: { family?: number | string; all?: boolean }, callback: LookupCallback): void => {
    resolve(hostname).then((addresses) => {
      const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family) || 0;
      const usable = addresses.filter((a) => family === 0 || a.family === family);
      const blocked = addresses.find((a) => isBlockedAddress(a.address));
      if (blocked && !allowPrivate) return callback(new PrivateDestinationError(blocked.address), '');
      if (usable.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '');
      if (options.all) return callback(null, usable);
      callback(null, usable[0].address, usable[0].family);
    }, (err: NodeJS.ErrnoException) => callback(err, ''));
  };
}
