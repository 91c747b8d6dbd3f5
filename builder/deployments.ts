import { StoreDuplicateError } from '../store/mod.js';
import { nowIso } from '../platform/clock.js';
import { AGENTS } from '../platform/errors.js';
import { newId } from '../platform/secrets.js';
import { ENVIRONMENTS, type Environment } from '../tenancy/connectors.js';
import { MAIN, type Caller } from './agents.js';
import { type Content, contentHash, withDefaults } from './content.js';
import type { AgentRecord, ArtifactRecord, BranchRecord, BuilderRecords, DeploymentRecord } from './records.js';

/** The result of publish, promote and rollback (contract section 2.2). */
export interface DeploymentResult {
  deployment: DeploymentRecord;
  testRunIds: string[];
}

/** The environment after `env` in the pipeline sandbox → pre-release → live, or null after live. */
export function nextEnvironment(env: Environment): Environment | null {
  return ENVIRONMENTS[ENVIRONMENTS.indexOf(env) + 1] ?? null;
}

/**
 * Deployments (contract 3.2): publish freezes main into an immutable, content-addressed artifact and deploys it
 * to sandbox; promote moves a deployment on to the next environment (a new deployment of its artifact there);
 * rollback reverts an environment to an earlier deployment of it, which becomes active again (the same
 * deployment, its id and `version` unchanged). The active deployment of an environment is the one activated
 * last there (`activated_seq`).
 */
export class Deployments {
  constructor(
    private readonly r: BuilderRecords,
    private readonly mainBranch: (agent: AgentRecord) => Promise<BranchRecord>,
  ) {}

  async publish(caller: Caller, agent: AgentRecord, input: { environment: Environment; deploymentMessage: string }): Promise<DeploymentResult> {
    if (input.environment !== 'sandbox') {
      throw AGENTS.PUBLISH_NOT_SANDBOX();
    }
    const main = await this.mainBranch(agent);
    const artifact = await this.freeze(agent, withDefaults(main.content));
    return this.deploy(caller, agent, 'sandbox', artifact.artifact_version, {
      action: 'publish',
      branch: MAIN,
      deploymentMessage: input.deploymentMessage,
    });
  }

  async promote(
    caller: Caller,
    agent: AgentRecord,
    deploymentId: string,
    input: { targetEnvironment?: Environment; deploymentMessage: string },
  ): Promise<DeploymentResult> {
    // The deployment moves on from the furthest environment it has reached: promoted twice, a sandbox
    // deployment goes to pre-release, then live. A promote made meanwhile from the same deployment takes the
    // step first (one promotion per source, a unique index): this one then moves on from where that one got.
    for (;;) {
      const source = await this.furthest(agent, await this.get(agent, deploymentId));
      const next = nextEnvironment(source.environment);
      const target = input.targetEnvironment ?? next;
      if (!target || next === null) {
        throw AGENTS.DEPLOYMENT_LIVE();
      }
      if (ENVIRONMENTS.indexOf(target) <= ENVIRONMENTS.indexOf(source.environment)) {
        throw AGENTS.PROMOTE_BACKWARDS(source.environment);
      }
      try {
        return await this.deploy(caller, agent, target, source.artifact_version, {
          action: 'promote',
          sourceDeploymentId: source.id,
          sourceEnvironment: source.environment,
          deploymentMessage: input.deploymentMessage,
        });
      } catch (err) {
        if (!(err instanceof StoreDuplicateError)) throw err;
      }
    }
  }

  /**
   * Reverts the deployment's environment to it: it becomes the active deployment there again, with what the
   * rollback was (when, by whom, from which deployment, its message) in `metadata.rollback`.
   */
  async rollback(caller: Caller, agent: AgentRecord, deploymentId: string, input: { deploymentMessage: string }): Promise<DeploymentResult> {
    const target = await this.get(agent, deploymentId);
    const from = await this.active(agent.id, target.environment);
    const seq = await this.nextSeq(agent);
    const rollback = { deploymentMessage: input.deploymentMessage, rolledBackAt: nowIso(), rolledBackBy: caller.keyId, rolledBackFrom: from?.id ?? null };
    const deployment = await this.r.deployments.update(
      { id: target.id },
      { $set: { activated_seq: seq, metadata: Object.assign({}, target.metadata, { rollback }) } },
    );
    if (!deployment) throw AGENTS.DEPLOYMENT_NOT_FOUND();
    return { deployment, testRunIds: [] };
  }

  /** The agent's next deployment counter value: each deployment and each rollback takes one. */
  private async nextSeq(agent: AgentRecord): Promise<number> {
    const counted = await this.r.agents.update({ id: agent.id }, { $inc: { deployment_seq: 1 }, $set: { updated_at: nowIso() } });
    if (!counted) throw AGENTS.AGENT_NOT_FOUND();
    return counted.deployment_seq;
  }

  /** The furthest deployment `d` has been promoted to (itself, or one promoted from it, and so on). */
  private async furthest(agent: AgentRecord, d: DeploymentRecord): Promise<DeploymentRecord> {
    const all = await this.r.deployments.find({ agent_id: agent.id }, { sort: { seq: 1 } });
    let reached = d;
    for (const x of all) {
      if (x.metadata.action === 'promote' && x.metadata.sourceDeploymentId === reached.id) reached = x;
    }
    return reached;
  }

  async get(agent: AgentRecord, deploymentId: string): Promise<DeploymentRecord> {
    const d = await this.r.deployments.get(deploymentId);
    if (!d || d.agent_id !== agent.id) throw AGENTS.DEPLOYMENT_NOT_FOUND();
    return d;
  }

  /** Deployments of an agent, the one activated last first, optionally of one environment. */
  list(agent: AgentRecord, environment?: Environment, limit = 100): Promise<DeploymentRecord[]> {
    const filter: Record<string, unknown> = { agent_id: agent.id };
    if (environment) filter.environment = environment;
    return this.r.deployments.find(filter, { sort: { activated_seq: -1 }, limit });
  }

  /** What runs in an environment now, or null. */
  active(agentId: string, environment: Environment): Promise<DeploymentRecord | null> {
    return this.r.deployments.findOne({ agent_id: agentId, environment }, { sort: { activated_seq: -1 } });
  }

  /** The frozen content running in an environment (what a conversation there runs), or null. */
  async deployedContent(agentId: string, environment: Environment): Promise<{ deployment: DeploymentRecord; content: Content } | null> {
    const deployment = await this.active(agentId, environment);
    if (!deployment) return null;
    const artifact = await this.r.artifacts.get(artifactKey(agentId, deployment.artifact_version));
    return artifact ? { deployment, content: withDefaults(artifact.content) } : null;
  }

  /** The frozen content of an artifact version of an agent, or null. */
  async artifact(agentId: string, version: string): Promise<Content | null> {
    const a = await this.r.artifacts.get(artifactKey(agentId, version));
    return a ? withDefaults(a.content) : null;
  }

  private async freeze(agent: AgentRecord, content: Content): Promise<ArtifactRecord> {
    const version = contentHash(content);
    const id = artifactKey(agent.id, version);
    try {
      return await this.r.artifacts.insert({
        id,
        agent_id: agent.id,
        account_id: agent.account_id,
        artifact_version: version,
        content,
        created_at: nowIso(),
      });
    } catch (err) {
      if (!(err instanceof StoreDuplicateError)) throw err;
      return (await this.r.artifacts.get(id))!;
    }
  }

  private async deploy(
    caller: Caller,
    agent: AgentRecord,
    environment: Environment,
    artifactVersion: string,
    metadata: Record<string, unknown>,
  ): Promise<DeploymentResult> {
    const seq = await this.nextSeq(agent);
    const deployment = await this.r.deployments.insert({
      id: newId('dep'),
      account_id: agent.account_id,
      agent_id: agent.id,
      environment,
      artifact_version: artifactVersion,
      seq,
      activated_seq: seq,
      created_by: caller.keyId,
      created_at: nowIso(),
      metadata,
    });
    return { deployment, testRunIds: [] };
  }
}

const artifactKey = (agentId: string, version: string) => `${agentId}:${version}`;
