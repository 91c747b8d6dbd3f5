/**
 * The agent builder: agents, branches and their content, three-way merge, content-addressed artifacts,
 * deployments through environments, and real-time config pages. Store-backed services; no HTTP here.
 */
import type { Store } from '../store/mod.js';
import { Agents, MAIN, MAX_AGENTS_PER_ACCOUNT } from './agents.js';
import { Branches } from './branches.js';
import { Deployments } from './deployments.js';
import { RealtimeConfigs, type RealtimeConfigCache } from './realtime-configs.js';
import { builderRecords } from './records.js';
import { telephony, type Telephony } from './telephony.js';

export { MAIN, MAX_AGENTS_PER_ACCOUNT, type Caller } from './agents.js';
export type { Attribute, Content, ProjectFunction, Topic, Variant, VoiceConfig } from './content.js';
export type { AgentRecord, BranchRecord, DeploymentRecord, RealtimeConfigRecord } from './records.js';
export type { DeploymentResult } from './deployments.js';
export { configPageChars, MAX_CONFIG_PAGE_CHARS, type RealtimeConfigCache } from './realtime-configs.js';

export interface Builder {
  agents: Agents;
  branches: Branches;
  deployments: Deployments;
  realtimeConfigs: RealtimeConfigs;
  /** SIP trunks and phone numbers of agents (not branch-scoped). */
  telephony: Telephony;
}

/** The builder's settings (`AGENTS_MAX_PER_ACCOUNT`). */
export interface BuilderOptions {
  /** The most agents an account holds (default `MAX_AGENTS_PER_ACCOUNT`). */
  maxAgentsPerAccount?: number;
}

/**
 * `cache`: where this process keeps real-time config pages (none: every read goes to the store); `options`: its
 * bounds.
 */
export function createBuilder(store: Store, cache?: RealtimeConfigCache, options: BuilderOptions = {}): Builder {
  const records = builderRecords(store);
  const branches = new Branches(records);
  return {
    agents: new Agents(records, options.maxAgentsPerAccount ?? MAX_AGENTS_PER_ACCOUNT),
    branches,
    deployments: new Deployments(records, (agent) => branches.get(agent, MAIN)),
    realtimeConfigs: new RealtimeConfigs(records, cache),
    telephony: telephony(store),
  };
}
export {
  SIP_TRANSPORTS,
  TRANSFER_MODES,
  telephony as telephonyOf,
  viewPhoneNumber,
  viewTelephonyConnector,
  type PhoneNumberRecord,
  type SipTransport,
  type Telephony,
  type TelephonyConnectorRecord,
  type TelephonyScope,
  type TransferMode,
  type Trunk,
} from './telephony.js';
