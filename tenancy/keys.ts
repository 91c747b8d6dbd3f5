import type { Store } from '../store/mod.js';
import type { TtlLru } from './cache.js';
import { CredentialRecords, type CredentialRecord } from './credentials.js';

/** What a key may call: one interface family each. */
/** `live_agent`: people who answer handed-off Messaging sessions of the key's account on the live-agent desk. */
export const KEY_SCOPES = ['agents', 'alerts', 'conversations', 'chat', 'external_events', 'live_agent'] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];

/** Scopes whose keys are bound to one project. */
export const PROJECT_SCOPES: readonly KeyScope[] = ['conversations', 'chat', 'external_events'];

export const KEY_PERMISSIONS = ['conversations_data', 'pii'] as const;
export type KeyPermission = (typeof KEY_PERMISSIONS)[number];

/** What the operator decides about a key. */
export interface ApiKeyFields {
  account_id: string;
  scope: KeyScope;
  project_id: string | null;
  permissions: KeyPermission[];
}

/** A stored API key. The secret itself is never stored, only its SHA-256. */
export interface ApiKey extends CredentialRecord, ApiKeyFields {}

/** The public view of a key (no hash, no secret). */
export interface ApiKeyView extends ApiKeyFields {
  id: string;
  created_at: string;
}

/**
 * API keys (`sbk_...`): issued, revoked and verified through the store, read through `cache`; revocation is
 * effective at once because the admin API invalidates every process's cache before it answers.
 */
export class ApiKeys extends CredentialRecords<ApiKeyFields, ApiKey> {
  constructor(store: Store, cache: TtlLru<ApiKey> | null = null) {
    super(store.collection<ApiKey>({ name: 'api_keys', indexes: [{ fields: ['account_id'] }] }), 'sbk', 'key', cache);
  }
}

export function viewKey(k: ApiKey): ApiKeyView {
  return {
    id: k.id,
    scope: k.scope,
    account_id: k.account_id,
    project_id: k.project_id,
    permissions: k.permissions,
    created_at: k.created_at,
  };
}
