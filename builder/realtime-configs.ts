import { StoreDuplicateError } from '../store/mod.js';
import { nowIso } from '../platform/clock.js';
import { AGENTS } from '../platform/errors.js';
import { ENVIRONMENTS, type Environment } from '../tenancy/connectors.js';
import type { RealtimePage, TtlLru } from '../tenancy/cache.js';
import type { AgentRecord, BuilderRecords, RealtimeConfigRecord } from './records.js';

const MAX_CAS_ATTEMPTS = 50;

/**
 * The most a config page's variables hold, as JSON characters: a patch's body is refused past it, and so is a
 * patch whose result (the page merged with it) would be. Every turn reads the pages and every read of the
 * page serializes it, so a page that patches could grow without end (each within the limit) made every one
 * of them, and the edge thread they share with other accounts, as slow as the page was large.
 */
export const MAX_CONFIG_PAGE_CHARS = 256 * 1024;

/** The size `MAX_CONFIG_PAGE_CHARS` bounds: the variables' JSON length. */
export const configPageChars = (variables: Record<string, unknown>): number => JSON.stringify(variables).length;

/**
 * RFC 7386 JSON merge patch: objects merge key by key, `null` removes a key, anything else replaces.
 * Returns a new object; `target` is not modified.
 */
export function mergePatch(target: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...target };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else setOwn(out, key, isPlainObject(value) ? mergePatch(isPlainObject(out[key]) ? (out[key] as Record<string, unknown>) : {}, value) : value);
  }
  return out;
}

/** Sets an own property, even one named `__proto__`, without touching the prototype. */
function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Where a process keeps agents' pages between turns (`TenancyCache.realtimeConfigs`), and how a change
 * reaches every process's copy before the change is answered (the invalidation bus).
 */
export interface RealtimeConfigCache {
  pages: TtlLru<readonly RealtimePage[]>;
  invalidate(agentId: string): Promise<void>;
}

/**
 * Real-time config pages: runtime values that take effect without a publish. A page named after an
 * environment (`sandbox`, `pre-release`, `live`) applies to that environment only; any other page applies
 * to every environment. `effective` layers the environment's page over the shared ones.
 *
 * Every turn reads them, so a process keeps each agent's pages in its cache; `patch` invalidates them in
 * every process before it returns, so the next turn anywhere sees the change.
 */
export class RealtimeConfigs {
  constructor(
    private readonly r: BuilderRecords,
    private readonly cache?: RealtimeConfigCache,
  ) {}

  async patch(agent: AgentRecord, config: string, variables: Record<string, unknown>): Promise<RealtimeConfigRecord> {
    const page = await this.write(agent, config, variables);
    await this.cache?.invalidate(agent.id);
    return page;
  }

  private async write(agent: AgentRecord, config: string, variables: Record<string, unknown>): Promise<RealtimeConfigRecord> {
    const id = `${agent.id}/${config}`;
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const current = await this.r.realtimeConfigs.get(id);
      const next = mergePatch(current?.variables ?? {}, variables);
      // A patch that leaves the page smaller is taken even past the limit (a page stored before it), so it can be cut down.
      const chars = configPageChars(next);
      if (chars > MAX_CONFIG_PAGE_CHARS && chars > configPageChars(current?.variables ?? {})) throw AGENTS.CONFIG_TOO_LARGE(chars);
      if (!current) {
        try {
          return await this.r.realtimeConfigs.insert({
            id,
            agent_id: agent.id,
            account_id: agent.account_id,
            config,
            variables: next,
            rev: 1,
            updated_at: nowIso(),
          });
        } catch (err) {
          if (err instanceof StoreDuplicateError) continue;
          throw err;
        }
      }
      const updated = await this.r.realtimeConfigs.update(
        { id, rev: current.rev },
        { $set: { variables: next, rev: current.rev + 1, updated_at: nowIso() } },
      );
      if (updated) return updated;
    }
    throw AGENTS.CONFIG_BUSY();
  }

  get(agent: AgentRecord, config: string): Promise<RealtimeConfigRecord | null> {
    return this.r.realtimeConfigs.get(`${agent.id}/${config}`);
  }

  list(agent: AgentRecord): Promise<RealtimeConfigRecord[]> {
    return this.r.realtimeConfigs.find({ agent_id: agent.id }, { sort: { config: 1 } });
  }

  /**
   * The variables a conversation in `environment` sees right now. With the cache, the merge of each cached
   * list of pages is kept with it (every turn reads them) and frozen, as every turn shares it; a `patch`
   * replaces the cached list, and with it the merge.
   */
  async effective(agentId: string, environment: Environment): Promise<Record<string, unknown>> {
    const read = () => this.r.realtimeConfigs.find({ agent_id: agentId }, { sort: { config: 1 } });
    if (!this.cache) return layered(await read(), environment);
    const pages = (await this.cache.pages.read(agentId, read)) ?? NO_PAGES;
    let byEnvironment = this.merged.get(pages);
    if (!byEnvironment) this.merged.set(pages, (byEnvironment = new Map()));
    let variables = byEnvironment.get(environment);
    if (!variables) byEnvironment.set(environment, (variables = deepFreeze(layered(pages, environment))));
    return variables;
  }

  /** The merged variables of each cached list of pages, per environment (see `effective`). */
  private readonly merged = new WeakMap<readonly RealtimePage[], Map<Environment, Record<string, unknown>>>();
}

const NO_PAGES: readonly RealtimePage[] = Object.freeze([]);

/** The pages that apply to every environment, then the environment's own page, each merged over the last. */
function layered(pages: readonly RealtimePage[], environment: Environment): Record<string, unknown> {
  const shared = pages.filter((p) => !(ENVIRONMENTS as readonly string[]).includes(p.config));
  const own = pages.find((p) => p.config === environment);
  return [...shared, ...(own ? [own] : [])].reduce<Record<string, unknown>>((acc, p) => mergePatch(acc, p.variables), {});
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
