import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import type { Store } from '../../store/mod.js';
import type { AttemptInput, AttemptResult } from '../../machines/delivery.js';
import type { Task } from '../task.js';
import { isBlockedAddress } from './address.js';
import { deliveryLookups, guardedLookup, hostOf, parseWebhookUrl, PrivateDestinationError } from './destination.js';
import { webhookEndpoints } from './endpoints.js';
import type { BoundedLookups } from './lookup.js';
import type { SecretBox } from './secret-box.js';
import { signatureHeaders } from './signature.js';

/** What the `attempt` effect needs. */
export interface AttemptDeps {
  store: Store;
  secrets: SecretBox;
  /** `WEBHOOK_ALLOW_PRIVATE_URLS`: deliver to loopback and private addresses too (tests, local setups). */
  allowPrivate: boolean;
  /** Told about every attempt made (the Prometheus counter). */
  onAttempt?: (result: AttemptResult) => void;
  now?: () => number;
  /** The name lookups (default: the thread's `deliveryLookups`, bounded per account and cached). */
  lookups?: BoundedLookups;
}

/** The response bytes read (and dropped) before the connection is closed: receivers answer briefly. */
const MAX_RESPONSE_BYTES = 64 * 1024;
export const USER_AGENT = 'Switchboard-Webhooks/1';

// Kept-alive connections: a receiver that gets many deliveries is not handshaken for each. Sockets are made
// through `guardedLookup`, so a pooled one is connected to an address that was checked.
const httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 64 });
const httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: 64 });

/**
 * The delivery machine's `attempt` effect: reads the endpoint as it is now (URL, headers, timeout, secret: a
 * rotated secret signs the next attempt), signs the body with a fresh timestamp, POSTs it and reports the
 * outcome. It never throws for what the receiver or the network did: those are results the machine judges.
 */
export function attemptEffect(deps: AttemptDeps): (input: AttemptInput) => Task<AttemptResult> {
  const now = deps.now ?? Date.now;
  const endpoints = webhookEndpoints(deps.store);
  const lookups = deps.lookups ?? deliveryLookups;
  return (input) => {
    const controller = new AbortController();
    const done = (async (): Promise<AttemptResult> => {
      const startedAt = now();
      const result = (r: Partial<AttemptResult>): AttemptResult => {
        const out = { startedAt, endedAt: now(), status: null, error: null, detail: null, retryAfterMs: null, ...r };
        deps.onAttempt?.(out);
        return out;
      };
      // The endpoint as it is now: the edge thread (or process) that rotated its secret or disabled it may
      // have committed after this thread's read snapshot began (lmdb-js keeps one until the next timers phase).
      deps.store.refresh();
      const endpoint = await endpoints.get(input.endpointId);
      if (!endpoint || endpoint.account_id !== input.accountId) return result({ error: 'endpoint_deleted' });
      if (!endpoint.enabled) return result({ error: 'endpoint_disabled' });
      const url = parseWebhookUrl(endpoint.url);
      if (typeof url === 'string') return result({ error: 'network', detail: 'EINVALIDURL' });
      // An address in the URL is connected to without a lookup: check it here.
      const host = hostOf(url);
      if (isIP(host) && !deps.allowPrivate && isBlockedAddress(host)) return result({ error: 'private_address' });
      const secret = deps.secrets.open(endpoint.secret);
      const headers: Record<string, string> = {
        // The endpoint's own headers never name these (RESERVED_HEADERS), so the order only keeps V8's fast path.
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(input.body)),
        'user-agent': USER_AGENT,
        ...endpoint.headers,
        ...signatureHeaders(secret, input.eventId, Math.floor(now() / 1000), input.body),
      };
      try {
        // The account's lookups: its dead names hold its own lookup slot, never another account's.
        const lookup = guardedLookup(deps.allowPrivate, (name) => lookups.lookup(name, input.accountId));
        const res = await post(url, headers, input.body, endpoint.timeout_ms, lookup, controller.signal);
        return result({ status: res.status, retryAfterMs: res.retryAfterMs });
      } catch (err) {
        if (err instanceof PrivateDestinationError) return result({ error: 'private_address' });
        if ((err as Error).name === 'TimeoutError') return result({ error: 'timeout' });
        return result({ error: 'network', detail: String((err as NodeJS.ErrnoException).code ?? (err as Error).name) });
      }
    })();
    return { done, cancel: () => controller.abort() };
  };
}

/**
 * One POST: resolves with the status once the answer is read (up to a bound), within `timeoutMs` in all. A status
 * that has arrived stands when the body is still arriving at the timeout: the receiver has answered (a 2xx has
 * taken the event), and its body is read only to be dropped.
 */
function post(url: URL, headers: Record<string, string>, body: string, timeoutMs: number, lookup: ReturnType<typeof guardedLookup>, signal: AbortSignal): Promise<{ status: number; retryAfterMs: number | null }> {
  return new Promise((resolve, reject) => {
    const https = url.protocol === 'https:';
    const req = (https ? httpsRequest : httpRequest)(url, {
      method: 'POST',
      headers,
      agent: https ? httpsAgent : httpAgent,
      lookup: lookup as never,
      signal,
    });
    let answer: IncomingMessage | null = null;
    // With an answer begun, cut its body off: its 'close' resolves with the status.
    const timer = setTimeout(() => (answer ? answer.destroy() : req.destroy(Object.assign(new Error('timed out'), { name: 'TimeoutError' }))), timeoutMs);
    const finish = (fn: () => void) => {
      clearTimeout(timer);
      fn();
    };
    req.on('error', (err) => finish(() => reject(err)));
    req.on('response', (res: IncomingMessage) => {
      answer = res;
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        // Enough read: the status is what counts, and this socket is not reused.
        if (read > MAX_RESPONSE_BYTES) res.destroy();
      });
      res.on('error', (err) => finish(() => reject(err)));
      res.on('close', () => finish(() => resolve({ status: res.statusCode ?? 0, retryAfterMs: retryAfter(res.headers['retry-after']) })));
    });
    req.end(body);
  });
}

/** `Retry-After` in ms: delay-seconds or an HTTP date; null when absent or unreadable. */
export function retryAfter(value: string | string[] | undefined, now = Date.now()): number | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return null;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}
