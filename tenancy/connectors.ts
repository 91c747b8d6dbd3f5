import type { Store } from '../store/mod.js';
import type { TtlLru } from './cache.js';
import { CredentialRecords, type CredentialRecord } from './credentials.js';

export const CONNECTOR_KINDS = ['chat', 'messaging', 'outbound'] as const;
export type ConnectorKind = (typeof CONNECTOR_KINDS)[number];

export const ENVIRONMENTS = ['sandbox', 'pre-release', 'live'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];

/** What an operator decides about a connector. */
export interface ConnectorFields {
  kind: ConnectorKind;
  account_id: string;
  project_id: string;
  environment: Environment;
  variant_id: string | null;
  host: string | null;
  /** Outbound connectors: the telephony connector (SIP trunk, `tc_…`) its calls go through. */
  telephony_connector_id?: string | null;
  /** Outbound connectors: the E.164 number its calls come from. */
  from_number?: string | null;
}

/** The public view of a connector (no token, no hash). */
export interface ConnectorView extends ConnectorFields {
  id: string;
  created_at: string;
}

/** A connector binds a token to one project, environment and (optionally) variant. */
export interface Connector extends CredentialRecord, ConnectorFields {}

/** Connector tokens (`sbc_...`): Chat `X-TOKEN`, Messaging `X-Token`, outbound auth token. */
export class Connectors extends CredentialRecords<ConnectorFields, Connector> {
  constructor(store: Store, cache: TtlLru<Connector> | null = null) {
    super(
      store.collection<Connector>({ name: 'connectors', indexes: [{ fields: ['account_id'] }, { fields: ['project_id'] }] }),
      'sbc',
      'con',
      cache,
    );
  }
}

export function viewConnector(c: Connector): ConnectorView {
  return {
    id: c.id,
    kind: c.kind,
    account_id: c.account_id,
    project_id: c.project_id,
    environment: c.environment,
    variant_id: c.variant_id,
    host: c.host,
    // Only outbound connectors carry these (operator.md's other responses stay exactly as they were).
    ...(c.kind === 'outbound' ? { telephony_connector_id: c.telephony_connector_id ?? null, from_number: c.from_number ?? null } : {}),
    created_at: c.created_at,
  };
}
