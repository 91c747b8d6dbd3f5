import type { Store } from '../store/mod.js';
import type { BlobStore } from '../store/blobs/mod.js';
import { type Builder, type BuilderOptions, createBuilder } from '../builder/mod.js';
import { Accounts } from '../tenancy/accounts.js';
import { TenancyCache, type TenancyCacheOptions } from '../tenancy/cache.js';
import { Connectors } from '../tenancy/connectors.js';
import { ApiKeys } from '../tenancy/keys.js';
import { Settings } from '../tenancy/settings.js';

/** The store-backed services every role shares, built once per process. */
export interface Services {
  store: Store;
  accounts: Accounts;
  keys: ApiKeys;
  connectors: Connectors;
  settings: Settings;
  builder: Builder;
  /** This process's cache of keys, connectors, accounts, projects and settings (`tenancy/cache.ts`). */
  tenancy: TenancyCache;
  /** Call recordings' blobs (store/blobs); absent in tools and tests that do not set it: no audio. */
  blobs?: BlobStore;
}

/** Without options (tools, tests) the caches are off: every read goes to the store, and the builder has its default bounds. */
export function createServices(store: Store, cache: TenancyCacheOptions = { ttlMs: 0, maxEntries: 0 }, builder?: BuilderOptions): Services {
  const tenancy = new TenancyCache(cache);
  return {
    store,
    accounts: new Accounts(store, tenancy.accounts),
    keys: new ApiKeys(store, tenancy.keys),
    connectors: new Connectors(store, tenancy.connectors),
    settings: new Settings(store, tenancy.settings),
    builder: createBuilder(store, { pages: tenancy.realtimeConfigs, invalidate: (id) => tenancy.invalidate({ kind: 'realtime', id }) }, builder),
    tenancy,
  };
}
