/**
 * The in-memory cache of the operator's records that every request reads: API keys and connectors (by record
 * id; the presented secret's SHA-256 is still compared with the stored hash in constant time on every use),
 * accounts and projects (by id and by slug), and project settings. One per process; every process that serves
 * requests (edge, socket gateway) fills its own.
 *
 * Revocation stays immediate: the operator's writes (a key or connector deleted, settings changed) invalidate
 * the entry in this process at once and, through `propagate` (set by `platform/invalidation.ts` over NATS),
 * in every other process before the admin call answers. Every entry also expires `ttlMs` after it was read
 * from the store, so a process that missed an invalidation (a lost message, a partition) serves a revoked
 * credential for at most that long. Only records found are cached: an unknown key or token is looked up again
 * on every use, so a credential issued a moment ago works at once. Each cache holds at most `maxEntries`
 * entries, least recently used out first (approximately: see `TtlLru`).
 */

import type { Account } from './accounts.js';
import type { Connector } from './connectors.js';
import type { ApiKey } from './keys.js';
import type { ProjectSettings } from './settings.js';

/**
 * What a write makes stale: an operator's (a key, a connector, settings) or an agent's real-time config pages
 * (`realtime`, by agent id). `all` empties every cache (a process that lost track).
 */
export type Invalidation =
  | { kind: 'key'; id: string }
  | { kind: 'connector'; id: string }
  | { kind: 'settings'; id: string }
  | { kind: 'realtime'; id: string }
  | { kind: 'all' };

/** A real-time config page as the conversation and session effects read it (`builder/realtime-configs.ts`). */
export interface RealtimePage {
  config: string;
  variables: Record<string, unknown>;
}

export interface TenancyCacheOptions {
  /** Lifetime of an entry from its store read; 0 disables caching (every read goes to the store). */
  ttlMs: number;
  /** Entries per cache (keys, connectors, accounts, projects, settings). */
  maxEntries: number;
  /** Monotonic milliseconds; tests may pass their own. */
  now?: () => number;
}

/** Counters of one cache: `misses` are the store reads made through it. */
export interface CacheStats {
  size: number;
  hits: number;
  misses: number;
  invalidations: number;
}

interface Entry<V> {
  value: V;
  expires: number;
  /** Used since it was stored or last passed over for eviction. */
  hit: boolean;
}

/**
 * A bounded map with a lifetime per entry, least recently used out first, approximately: a `Map` keeps
 * insertion order, and a hit only marks its entry. When a new entry would take the map over its bound, room is
 * made first: the first entry goes unless it was hit since it was stored, in which case it is moved to the end
 * unmarked (its second chance) and the next one is looked at. Moving the entry on every hit instead (a delete
 * and a set) made every request's checks rehash the maps' tables (bench/README.md, eighth session). `read`
 * fills it from a loader, and never stores what a loader returned if an invalidation happened while the loader
 * ran: a read that began before a revocation may answer its own request, but cannot put the revoked record back.
 */
export class TtlLru<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private generation = 0;
  private readonly counters = { hits: 0, misses: 0, invalidations: 0 };

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries: number,
    private readonly now: () => number,
  ) {}

  /** The cached value of `key`, or what `load` returns (cached unless null or invalidated meanwhile). */
  async read(key: string, load: () => Promise<V | null>): Promise<V | null> {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    this.counters.misses++;
    const generation = this.generation;
    const value = await load();
    if (value !== null && generation === this.generation) this.set(key, value);
    return value;
  }

  get(key: string): V | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expires <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    e.hit = true;
    this.counters.hits++;
    return e.value;
  }

  set(key: string, value: V): void {
    if (this.ttlMs <= 0 || this.maxEntries <= 0) return;
    this.entries.delete(key);
    // Room is made before the new entry goes in, so that it is never the one evicted (when every other entry
    // was hit since its last pass). Ends: every entry passed over is unmarked, so a second pass evicts.
    while (this.entries.size >= this.maxEntries) {
      const [first, e] = this.entries.entries().next().value!;
      this.entries.delete(first);
      if (e.hit) {
        e.hit = false;
        this.entries.set(first, e);
      }
    }
    // Every request that hits shares this object: frozen, so a caller that changed it would fail loudly.
    this.entries.set(key, { value: freeze(value), expires: this.now() + this.ttlMs, hit: false });
  }

  /** Drops the entry of `key` (every entry without it), and keeps any fill still in flight from being stored. */
  invalidate(key?: string): void {
    this.generation++;
    this.counters.invalidations++;
    if (key === undefined) this.entries.clear();
    else this.entries.delete(key);
  }

  stats(): CacheStats {
    return { size: this.entries.size, ...this.counters };
  }
}

/** What a request needs of a project (an agent): its identity, which never changes. */
export interface ProjectRef {
  id: string;
  account_id: string;
  slug: string;
}

/** The caches of one process, and how an operator's write reaches the other processes' caches. */
export class TenancyCache {
  /** API keys by record id. */
  readonly keys: TtlLru<ApiKey>;
  /** Connectors by record id. */
  readonly connectors: TtlLru<Connector>;
  /** Accounts by id and by slug (accounts are never deleted or renamed). */
  readonly accounts: TtlLru<Account>;
  /** Projects by `<account id>/<project id or slug>` (projects are never deleted, moved or renamed). */
  readonly projects: TtlLru<ProjectRef>;
  /** Project settings by project id. */
  readonly settings: TtlLru<ProjectSettings>;
  /**
   * An agent's real-time config pages by agent id, sorted by name, read by every turn of a worker's
   * conversations and sessions. A change takes effect at once (contract 4.1): `PATCH` invalidates them in
   * every process, workers included, before it answers.
   */
  readonly realtimeConfigs: TtlLru<readonly RealtimePage[]>;
  /**
   * Carries an invalidation to the other processes and resolves once they applied it (or the wait gave up):
   * set by the NATS invalidation bus; unset in a process that is alone (the embedded default).
   */
  propagate: ((change: Invalidation) => Promise<void>) | null = null;

  constructor(readonly options: TenancyCacheOptions) {
    const now = options.now ?? (() => performance.now());
    const make = <V>() => new TtlLru<V>(options.ttlMs, options.maxEntries, now);
    this.keys = make();
    this.connectors = make();
    this.accounts = make();
    this.projects = make();
    this.settings = make();
    this.realtimeConfigs = make();
  }

  /** Applies an invalidation to this process's caches only (what a received broadcast does). */
  invalidateLocal(change: Invalidation): void {
    switch (change.kind) {
      case 'key':
        this.keys.invalidate(change.id);
        break;
      case 'connector':
        this.connectors.invalidate(change.id);
        break;
      case 'settings':
        this.settings.invalidate(change.id);
        break;
      case 'realtime':
        this.realtimeConfigs.invalidate(change.id);
        break;
      case 'all':
        for (const c of [this.keys, this.connectors, this.accounts, this.projects, this.settings, this.realtimeConfigs]) c.invalidate();
        break;
    }
  }

  /** Invalidates here, then everywhere else; resolves when every process reached has applied it. */
  async invalidate(change: Invalidation): Promise<void> {
    this.invalidateLocal(change);
    await this.propagate?.(change);
  }

  stats(): Record<'keys' | 'connectors' | 'accounts' | 'projects' | 'settings' | 'realtimeConfigs', CacheStats> {
    return {
      keys: this.keys.stats(),
      connectors: this.connectors.stats(),
      accounts: this.accounts.stats(),
      projects: this.projects.stats(),
      settings: this.settings.stats(),
      realtimeConfigs: this.realtimeConfigs.stats(),
    };
  }
}

function freeze<V>(value: V): V {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) if (Array.isArray(v)) Object.freeze(v);
    Object.freeze(value);
  }
  return value;
}
