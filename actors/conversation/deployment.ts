import type { Builder, Content } from '../../builder/mod.js';
import type { Environment } from '../../tenancy/connectors.js';

/** What a conversation runs: the content deployed to its environment, and which artifact that is. */
export interface Running {
  content: Content;
  /** The artifact version, or null when nothing is deployed there and main's draft runs instead. */
  artifactVersion: string | null;
}

/**
 * The content a conversation in `environment` runs: the active deployment's artifact. An agent with no
 * deployment in that environment runs main's current draft, so a new agent answers before its first publish.
 */
export async function runningContent(builder: Builder, projectId: string, environment: string): Promise<Running | null> {
  const deployed = await builder.deployments.deployedContent(projectId, environment as Environment);
  if (deployed) return { content: deployed.content, artifactVersion: deployed.deployment.artifact_version };
  const main = await builder.branches.mainOf(projectId);
  return main ? { content: main.content, artifactVersion: null } : null;
}

const ARTIFACT_CACHE = 500;

/**
 * Artifacts are immutable (content-addressed), so the content of one is read from the store once and then
 * served from memory; a small LRU bounds it.
 */
export function artifactCache(builder: Builder) {
  const cache = new Map<string, Content>();
  return async (projectId: string, version: string): Promise<Content | null> => {
    const key = `${projectId}:${version}`;
    const hit = cache.get(key);
    if (hit) {
      cache.delete(key);
      cache.set(key, hit);
      return hit;
    }
    const content = await builder.deployments.artifact(projectId, version);
    if (content) {
      cache.set(key, content);
      if (cache.size > ARTIFACT_CACHE) cache.delete(cache.keys().next().value!);
    }
    return content;
  };
}

/** The variant a conversation runs: the requested one, else the artifact's default, else none. */
export function pickVariant(content: Content, requested: string | null): { id: string; name: string } | null {
  const variants = Object.values(content.variants ?? {});
  const chosen = requested ? variants.find((v) => v.id === requested || v.name === requested) : variants.find((v) => v.isDefault);
  return chosen ? { id: chosen.id, name: chosen.name } : null;
}

/**
 * The variant a draft run goes on with once it pins `content`, the artifact it found deployed: the one it ran, when
 * the artifact has it; else the one it would have started on there (`pickVariant`), as a conversation that started
 * on the artifact would run, none when the artifact offers none.
 */
export function variantOnPin(content: Content, ran: { id: string; name: string } | null, requested: string | null): { id: string; name: string } | null {
  if (ran && Object.values(content.variants ?? {}).some((v) => v.id === ran.id)) return ran;
  return pickVariant(content, requested);
}
