import type { Collection, Doc, Filter, JournalEntry, Store } from '../../store/mod.js';
import { LiveCache } from '../projection/live-cache.js';
import type { Projector } from '../projection/mod.js';
import { decode } from '../protocol.js';

/**
 * The actor index: one record per actor that ever committed a step, with its kind, id, account and
 * project (from its events' `account_id`/`project_id`, kept once seen), its state value and when it last
 * moved. Written by a projector over the journal (`actorIndexProjector`, listed in
 * `actors/projection/registry.ts`), so the inspector can search actors by kind, state and project and count
 * them per kind and state across the fleet without asking any worker.
 */
export interface ActorIndexRecord extends Doc {
  /** `kind/id`. */
  id: string;
  kind: string;
  actor_id: string;
  account_id: string | null;
  project_id: string | null;
  value: unknown;
  /** The active leaf states, dot-joined paths, sorted and joined with ` | ` (one string per configuration). */
  state: string;
  /** Every active state path (parents included): what `state=` searches match. */
  states: string[];
  version: number;
  seq: number;
  updated_at: string;
  /** Set once the snapshot was read for a tenant its events did not carry (never read again). */
  tenant_looked_up?: boolean;
}

export const actorIndex = (store: Store): Collection<ActorIndexRecord> =>
  store.collection<ActorIndexRecord>({
    name: 'inspector_actors',
    indexes: [{ fields: ['kind', 'state'] }, { fields: ['project_id', 'kind'] }, { fields: ['updated_at'] }],
    readModel: true,
  });

/** Every active path of a state value (parents included) and its leaves. */
export function statePaths(value: unknown): { all: string[]; leaves: string[] } {
  const all: string[] = [];
  const leaves: string[] = [];
  const walk = (prefix: string, v: unknown) => {
    const at = (k: string) => (prefix ? `${prefix}.${k}` : k);
    if (typeof v === 'string') {
      all.push(at(v));
      leaves.push(at(v));
    } else if (v && typeof v === 'object') {
      for (const [k, sub] of Object.entries(v)) {
        all.push(at(k));
        walk(at(k), sub);
      }
    }
  };
  walk('', value);
  return { all, leaves: leaves.sort() };
}

/** The account and project ids among `a` and `p` that are strings. */
function tenant(a: unknown, p: unknown): { account_id?: string; project_id?: string } {
  const t: { account_id?: string; project_id?: string } = {};
  if (typeof a === 'string') t.account_id = a;
  if (typeof p === 'string') t.project_id = p;
  return t;
}

const tenantOf = (entry: JournalEntry): { account_id?: string; project_id?: string } => {
  for (const e of entry.events) {
    const a = e.data?.account_id;
    const p = e.data?.project_id;
    if (typeof a === 'string' || typeof p === 'string') return tenant(a, p);
  }
  return {};
};

/** `accountId`/`projectId` (or `account_id`/`project_id`) at the top of a context or one level down. */
function tenantInContext(context: unknown): { account_id?: string; project_id?: string } {
  const look = (o: unknown) => {
    if (!o || typeof o !== 'object') return {};
    const r = o as Record<string, unknown>;
    const a = r.accountId ?? r.account_id;
    const p = r.projectId ?? r.project_id;
    return tenant(a, p);
  };
  const top = look(context);
  if (top.project_id) return top;
  for (const v of Object.values((context as Record<string, unknown>) ?? {})) {
    const found = look(v);
    if (found.project_id) return found;
  }
  return top;
}

/**
 * An actor's account and project when its steps' events do not say (a kind whose machine emits no
 * tenant-bearing events, or steps before its first): read once from its stored snapshot's context.
 */
async function tenantFromSnapshot(store: Store, key: string): Promise<{ account_id?: string; project_id?: string }> {
  const record = await store.snapshots.get(key);
  if (!record) return {};
  const persisted = (record.data ?? {}) as { s?: { context?: unknown } };
  return tenantInContext(persisted.s?.context);
}

/** What the index holds of an actor that its next step needs: the `before` of `actorIndexProjector`. */
type Indexed = Pick<ActorIndexRecord, 'version' | 'account_id' | 'project_id' | 'tenant_looked_up'>;

/**
 * Live actors whose index record the projector keeps in memory, per store (several platforms may share a
 * process), and how long an entry must have been idle before a new one may take its place (`LiveCache`).
 * Beyond it an actor's record is read back at its next step.
 */
const indexed = (r: Indexed): Indexed => ({ version: r.version, account_id: r.account_id, project_id: r.project_id, tenant_looked_up: r.tenant_looked_up });
const LIVE_ACTORS = 16_384;
const LIVE_IDLE_MS = 60_000;
const live = new WeakMap<Store, LiveCache<Indexed>>();
const liveOf = (store: Store) => {
  let cache = live.get(store);
  if (!cache) live.set(store, (cache = new LiveCache<Indexed>(LIVE_ACTORS, LIVE_IDLE_MS)));
  return cache;
};

/** The projector that keeps the actor index (idempotent: an entry seen again writes nothing newer). */
export const actorIndexProjector: Projector = {
  name: 'actor-index',
  async apply(entries, store) {
    const index = actorIndex(store);
    const cache = liveOf(store);
    // Only each actor's newest step of the batch matters (plus the tenant any of its steps names); the
    // actors' reads and writes are issued together, so a batch costs one group commit, not one per entry.
    const byActor = new Map<string, JournalEntry[]>();
    for (const entry of entries) {
      if (entry.shard < 0 || entry.value === null || entry.value === undefined) continue;
      const list = byActor.get(entry.key);
      if (list) list.push(entry);
      else byActor.set(entry.key, [entry]);
    }
    await Promise.all(
      [...byActor.values()].map(async (list) => {
        const entry = list.reduce((a, b) => (b.version > a.version ? b : a));
        // What this projector last wrote of the actor stands for the stored record only for the step that
        // directly follows it (version + 1); anything else (a replay, a rebuild, another runner's write)
        // reads the store, as `putNewer` does anyway.
        const cached = cache.take(entry.key);
        const before: Indexed | null =
          cached && cached.version === list[0].version - 1 ? cached : await index.get(entry.key);
        if (before && before.version >= entry.version) {
          cache.set(entry.key, indexed(before));
          return;
        }
        const { all, leaves } = statePaths(entry.value);
        let tenant: { account_id?: string; project_id?: string } = {};
        for (const e of list) if (e.version > (before?.version ?? 0)) tenant = { ...tenant, ...tenantOf(e) };
        const lookUp = !tenant.project_id && !before?.project_id && !before?.tenant_looked_up;
        if (lookUp) tenant = { ...(await tenantFromSnapshot(store, entry.key)), ...tenant };
        const doc: ActorIndexRecord = {
          id: entry.key,
          kind: entry.kind,
          actor_id: entry.id,
          account_id: tenant.account_id ?? before?.account_id ?? null,
          project_id: tenant.project_id ?? before?.project_id ?? null,
          value: entry.value,
          state: leaves.join(' | '),
          states: all,
          version: entry.version,
          seq: entry.seq,
          updated_at: new Date(entry.at).toISOString(),
          ...(lookUp || before?.tenant_looked_up ? { tenant_looked_up: true } : {}),
        };
        // Refused: a newer record is stored (another runner got further); it is not remembered then.
        if (await index.putNewer(doc, 'version')) {
          cache.set(entry.key, indexed(doc));
        }
      }),
    );
  },
  async reset(store) {
    liveOf(store).clear();
    await actorIndex(store).delete({});
  },
};

export interface ActorSearch {
  kind?: string;
  /** A state path (`idle`, `agent.ready`): actors in that state or inside it. */
  state?: string;
  project?: string;
  account?: string;
  limit: number;
  cursor?: string;
}

/** Actors of the index matching a search, most recently moved first, one page. */
export async function searchActors(store: Store, q: ActorSearch) {
  const filter: Filter = {};
  if (q.kind) filter.kind = q.kind;
  if (q.state) filter.states = q.state;
  if (q.project) filter.project_id = q.project;
  if (q.account) filter.account_id = q.account;
  return actorIndex(store).page(filter, { sort: { updated_at: -1 }, limit: q.limit, cursor: q.cursor });
}

/** At most this many index records are counted per request (the fleet view's bound). */
export const COUNT_LIMIT = 100_000;

/** Actors per kind and per state configuration (`state`), across the fleet. */
export async function actorCounts(store: Store): Promise<{ total: number; kinds: Record<string, { total: number; states: Record<string, number> }> }> {
  const kinds: Record<string, { total: number; states: Record<string, number> }> = {};
  let total = 0;
  for (const r of await actorIndex(store).find({}, { limit: COUNT_LIMIT })) {
    const k = (kinds[r.kind] ??= { total: 0, states: {} });
    k.total++;
    k.states[r.state] = (k.states[r.state] ?? 0) + 1;
    total++;
  }
  return { total, kinds };
}
