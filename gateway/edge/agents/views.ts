import { z } from 'zod';
import type { AgentRecord, Attribute, BranchRecord, DeploymentRecord, RealtimeConfigRecord, Topic, Variant } from '../../../builder/mod.js';
import { ENVIRONMENTS } from '../../../tenancy/connectors.js';
import { JsonObject } from '../schemas.js';

/** Response shapes of the Agents API (camelCase, as the hosted service's). */
export const AgentView = z.object({
  agentId: z.string(),
  accountId: z.string(),
  name: z.string(),
  agentName: z.string(),
  slug: z.string(),
  description: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
  branchCount: z.number().int(),
});

export const BranchView = z.object({
  branchId: z.string(),
  agentId: z.string(),
  name: z.string(),
  status: z.enum(['open', 'merged']),
  baseBranch: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
  mergedAt: z.string().nullable(),
});

export const TopicView = z.object({ id: z.string(), name: z.string(), content: z.string() });
export const AttributeView = z.object({ id: z.string(), name: z.string() });
export const VariantView = z.object({
  id: z.string(),
  name: z.string(),
  isDefault: z.boolean(),
  attributeValues: z.object({ values: z.record(z.string(), z.string()) }),
});

export const BranchDetailView = BranchView.extend({
  behavior: z.string(),
  topics: z.array(TopicView),
  attributes: z.array(AttributeView),
  variants: z.array(VariantView),
});

export const DeploymentView = z.object({
  id: z.string(),
  accountId: z.string(),
  agentId: z.string(),
  environment: z.enum(ENVIRONMENTS),
  artifactVersion: z.string(),
  version: z.string(),
  createdBy: z.string(),
  createdAt: z.string(),
  metadata: JsonObject,
});

export const DeploymentResultView = z.object({ deployment: DeploymentView, testRunIds: z.array(z.string()) });

export const RealtimeConfigView = z.object({
  config: z.string(),
  variables: JsonObject,
  lastUpdated: z.string(),
});

export const agentView = (a: AgentRecord, branchCount: number): z.infer<typeof AgentView> => ({
  agentId: a.id,
  accountId: a.account_id,
  name: a.name,
  agentName: a.name,
  slug: a.slug,
  description: a.description,
  createdAt: a.created_at,
  updatedAt: a.updated_at,
  branchCount,
});

export const branchView = (b: BranchRecord): z.infer<typeof BranchView> => ({
  branchId: b.id,
  agentId: b.agent_id,
  name: b.name,
  // A merge holding the branch is internal: until it lands the branch is open, and it is again if the merge is refused.
  status: b.status === 'merging' ? 'open' : b.status,
  baseBranch: b.base ? 'main' : null,
  createdAt: b.created_at,
  updatedAt: b.updated_at,
  mergedAt: b.merged_at,
});

const byName = <T extends { name: string }>(items: Record<string, T>): T[] =>
  Object.values(items).sort((x, y) => x.name.localeCompare(y.name));

export const topicView = (t: Topic) => ({ id: t.id, name: t.name, content: t.content });
export const attributeView = (a: Attribute) => ({ id: a.id, name: a.name });
export const variantView = (v: Variant) => ({
  id: v.id,
  name: v.name,
  isDefault: v.isDefault,
  attributeValues: { values: { ...v.attributeValues.values } },
});

export const branchDetailView = (b: BranchRecord): z.infer<typeof BranchDetailView> =>
  Object.assign(branchView(b), {
    behavior: b.content.behavior,
    topics: byName(b.content.topics).map(topicView),
    attributes: byName(b.content.attributes).map(attributeView),
    variants: byName(b.content.variants).map(variantView),
  });

export const deploymentView = (d: DeploymentRecord): z.infer<typeof DeploymentView> => ({
  id: d.id,
  accountId: d.account_id,
  agentId: d.agent_id,
  environment: d.environment,
  artifactVersion: d.artifact_version,
  version: String(d.seq),
  createdBy: d.created_by,
  createdAt: d.created_at,
  metadata: d.metadata,
});

export const realtimeConfigView = (c: RealtimeConfigRecord): z.infer<typeof RealtimeConfigView> => ({
  config: c.config,
  variables: c.variables,
  lastUpdated: c.updated_at,
});

export { byName };
