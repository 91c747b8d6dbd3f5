import dns, { type LookupAddress } from 'node:dns';
import { FairQueue } from '../../platform/fair-queue.js';

/**
 * Name lookups for webhook URLs that cannot fill libuv's thread pool.
 *
 * `dns.lookup` (getaddrinfo, which reads /etc/hosts and nsswitch as every other program on the host does) runs
 * on libuv's process-wide pool of 4 threads, which fs, crypto and zlib share; a lookup whose name resolves
 * slowly or never holds its thread until the system resolver gives up, whatever its caller's timeout. One
 * account that fires test events at such a name used to take every thread, and every other account's
 * deliveries (and the platform's file I/O) waited behind it. So lookups go through here:
 *
 * - answers are cached per name (`ttlMs`; failures for `failureTtlMs`, so a dead name is not looked up again
 *   for every attempt), at most `maxCached` names;
 * - one lookup in flight per name: callers of a name in flight or queued wait for its answer;
 * - at most `maxInFlight` lookups in flight in all (below the pool's 4) and `maxPerAccount` per account, the
 *   accounts served fairly (`platform/fair-queue.ts`): one account's dead names hold at most its own slot;
 * - a caller waits at most `waitMs`, then fails with `ETIMEOUT` (a network error: the attempt is retried);
 *   the slot stays taken until the lookup really ends, since that is when its thread is free.
 *
 * Why getaddrinfo bounded rather than c-ares (`dns.promises.Resolver`, off the pool): c-ares does not read
 * /etc/hosts or nsswitch, so names that resolve for every other program here (`localhost`, hosts entries,
 * mDNS, split-horizon setups) would stop resolving for webhooks; bounding keeps the answers the system gives.
 */
export interface LookupLimits {
  maxInFlight: number;
  maxPerAccount: number;
  ttlMs: number;
  failureTtlMs: number;
  waitMs: number;
  maxCached: number;
}

/** The limits deliveries use: together with the URL checks' (1 in flight) at most 3 of the pool's 4 threads. */
export const DELIVERY_LOOKUP_LIMITS: LookupLimits = { maxInFlight: 2, maxPerAccount: 1, ttlMs: 30_000, failureTtlMs: 10_000, waitMs: 5000, maxCached: 1000 };

type Settle = (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void;

interface Entry {
  name: string;
  account: string;
  waiters: Set<Settle>;
}

interface Cached {
  until: number;
  addresses: LookupAddress[];
  error: NodeJS.ErrnoException | null;
}

/** Bounded, cached, coalesced `dns.lookup` (see the interface's comment above). */
export class BoundedLookups {
  private readonly cache = new Map<string, Cached>();
  /** Entries by name, queued or in flight. */
  private readonly entries = new Map<string, Entry>();
  /**
   * Queued entries, an account a queue (its own project in `FairQueue`'s terms): at most `maxPerAccount` of an
   * account's lookups in flight, the account with the fewest in flight served first, the least recently served
   * among equals.
   */
  private readonly queue: FairQueue<Entry>;
  private running = 0;

  constructor(
    private readonly limits: LookupLimits,
    private readonly now: () => number = Date.now,
  ) {
    this.queue = new FairQueue<Entry>(limits.maxPerAccount, Number.POSITIVE_INFINITY);
  }

  /** Every address `hostname` resolves to, for `account`'s delivery; rejects with the lookup's error or `ETIMEOUT`. */
  lookup(hostname: string, account: string): Promise<LookupAddress[]> {
    const name = hostname.toLowerCase();
    const hit = this.cache.get(name);
    if (hit && hit.until > this.now()) return hit.error ? Promise.reject(hit.error) : Promise.resolve(hit.addresses);
    if (hit) this.cache.delete(name);
    return new Promise((resolve, reject) => {
      let entry = this.entries.get(name);
      if (!entry) {
        entry = { name, account, waiters: new Set() };
        this.entries.set(name, entry);
        this.queue.push(account, account, entry);
      }
      const waiters = entry.waiters;
      const timer = setTimeout(() => {
        waiters.delete(settle);
        reject(Object.assign(new Error(`lookup of ${hostname} timed out`), { code: 'ETIMEOUT', hostname }));
      }, this.limits.waitMs);
      const settle: Settle = (err, addresses) => {
        clearTimeout(timer);
        if (err) reject(err);
        else resolve(addresses);
      };
      waiters.add(settle);
      this.pump();
    });
  }

  /** Starts queued lookups while slots are free, one account after another. */
  private pump(): void {
    while (this.running < this.limits.maxInFlight) {
      const next = this.queue.take();
      if (!next) return;
      const entry = next.item;
      // Everyone waiting gave up: nothing to look up (a later caller queues it again).
      if (entry.waiters.size === 0) {
        this.entries.delete(entry.name);
        this.queue.done(entry.account);
        continue;
      }
      this.start(entry);
    }
  }

  private start(entry: Entry): void {
    this.running++;
    dns.lookup(entry.name, { all: true }, (err, addresses) => {
      this.running--;
      this.queue.done(entry.account);
      this.entries.delete(entry.name);
      this.remember(entry.name, err ? { until: this.now() + this.limits.failureTtlMs, addresses: [], error: err } : { until: this.now() + this.limits.ttlMs, addresses, error: null });
      for (const settle of entry.waiters) settle(err, err ? [] : addresses);
      this.pump();
    });
  }

  private remember(name: string, cached: Cached): void {
    this.cache.delete(name);
    // The oldest answer goes first when full: a flood of distinct names cannot grow the cache.
    if (this.cache.size >= this.limits.maxCached) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(name, cached);
  }
}
