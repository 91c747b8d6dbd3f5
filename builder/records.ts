import type { Collection, Doc, Store } from '../store/mod.js';
import type { Environment } from '../tenancy/connectors.js';
import type { Content } from './content.js';

/** An agent; its id is also the `project_id` of the conversation interfaces. */
export interface AgentRecord extends Doc {
  account_id: string;
  name: string;
  slug: string;
  description: string;
  created_at: string;
  updated_at: string;
  /** Last deployment `version` handed out for this agent. */
  deployment_seq: number;
}

export interface BranchRecord extends Doc {
  agent_id: string;
  account_id: string;
  name: string;
  /**
   * `merging` while a merge holds the branch (`merge_lock`): it takes no edits then. Internal: the views show it
   * as `open`, which it is again unless the merge lands (`builder/branches.ts`).
   */
  status: 'open' | 'merging' | 'merged';
  /** The merge holding a `merging` branch: its token, and when it took the branch (ms since the epoch). */
  merge_lock?: MergeLock;
  /** Main's content when this branch was cut (null for main itself). */
  base: Content | null;
  content: Content;
  /** Optimistic-concurrency revision: every content change is a compare-and-set on it. */
  rev: number;
  created_at: string;
  updated_at: string;
  merged_at: string | null;
}

/** See `BranchRecord.merge_lock`. */
export interface MergeLock {
  token: string;
  at: number;
}

/**
 * A claim on a name of an account's agents (`builder/names.ts`): id `{account_id}/{name}`, so the store lets one
 * create have each name. `at`: when it was claimed (ms since the epoch); `by`: the token of the create that wrote
 * it, the one create that may release it (absent in claims written before creates released theirs).
 */
export interface NameClaimRecord extends Doc {
  account_id: string;
  name: string;
  agent_id: string;
  at: number;
  by?: string;
}

/** Frozen content, shared by every deployment of the same content hash. */
export interface ArtifactRecord extends Doc {
  agent_id: string;
  account_id: string;
  artifact_version: string;
  content: Content;
  created_at: string;
}

export interface DeploymentRecord extends Doc {
  account_id: string;
  agent_id: string;
  environment: Environment;
  artifact_version: string;
  /** The per-agent counter when it was made: its `version`, which never changes. */
  seq: number;
  /**
   * The per-agent counter when it last became its environment's active deployment: when it was made, or when
   * a rollback reverted the environment to it. The active deployment of an environment is the one with the
   * highest.
   */
  activated_seq: number;
  created_by: string;
  created_at: string;
  metadata: Record<string, unknown>;
}

export interface RealtimeConfigRecord extends Doc {
  agent_id: string;
  account_id: string;
  config: string;
  variables: Record<string, unknown>;
  rev: number;
  updated_at: string;
}

/** The builder's collections, declared once with their indexes. */
export interface BuilderRecords {
  agents: Collection<AgentRecord>;
  nameClaims: Collection<NameClaimRecord>;
  branches: Collection<BranchRecord>;
  artifacts: Collection<ArtifactRecord>;
  deployments: Collection<DeploymentRecord>;
  realtimeConfigs: Collection<RealtimeConfigRecord>;
}

export function builderRecords(store: Store): BuilderRecords {
  return {
    agents: store.collection<AgentRecord>({
      name: 'agents',
      indexes: [{ fields: ['account_id', 'created_at'] }, { fields: ['account_id', 'slug'], unique: true }],
    }),
    nameClaims: store.collection<NameClaimRecord>({ name: 'agent_name_claims' }),
    branches: store.collection<BranchRecord>({
      name: 'branches',
      indexes: [{ fields: ['agent_id', 'name'], unique: true }],
    }),
    artifacts: store.collection<ArtifactRecord>({ name: 'artifacts', indexes: [{ fields: ['agent_id'] }] }),
    deployments: store.collection<DeploymentRecord>({
      name: 'deployments',
      indexes: [
        { fields: ['agent_id', 'environment', 'activated_seq'] },
        { fields: ['agent_id', 'activated_seq'] },
        // A deployment is promoted once: two promotes of it at the same moment are one promotion and a retry.
        { fields: ['metadata.sourceDeploymentId'], unique: true, sparse: true },
      ],
    }),
    realtimeConfigs: store.collection<RealtimeConfigRecord>({
      name: 'realtime_configs',
      indexes: [{ fields: ['agent_id'] }],
    }),
  };
}
