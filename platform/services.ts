import type { Store } from '../store/mod.js';
import { type Builder, createBuilder } from '../builder/mod.js';
import { Accounts } from '../tenancy/accounts.js';
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
}

export function createServices(store: Store): Services {
  return {
    store,
    accounts: new Accounts(store),
    keys: new ApiKeys(store),
    connectors: new Connectors(store),
    settings: new Settings(store),
    builder: createBuilder(store),
  };
}
