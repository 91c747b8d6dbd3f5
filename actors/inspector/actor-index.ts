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

/**
 * How long an actor's record stands for its steps that leave its state and tenant as they are. Such a step
 * refreshes the record only once this long has passed since the step the record shows, so an actor that
 * steps many times a second in one state (a conversation, idle between its turns) is written about once a
 * second instead of at every step, while every change of state is written at once.
 */
export const REFRESH_MS = 1000;

/** What a record says that the next step is compared with: its step, when that was, and the state and tenant it shows. */
interface Shown {
  version: number;
  /** `updated_at`, in ms since the epoch. */
  at: number;
  state: string;
  account_id: string | null;
  project_id: string | null;
  tenant_looked_up?: boolean;
}

const shown = (r: ActorIndexRecord): Shown => ({
  version: r.version,
  at: Date.parse(r.updated_at),
  state: r.state,
  account_id: r.account_id,
  project_id: r.project_id,
  tenant_looked_up: r.tenant_looked_up,
});

/**
 * What the projector keeps of an actor between batches: the record it shows (stored, or about to be) and the
 * newest step it applied, which may be newer than the record's own (a step that did not refresh it).
 */
interface Indexed {
  applied: number;
  shown: Shown;
}

/**
 * Live actors whose index record the projector keeps in memory, per store (several platforms may share a
 * process), and how long an entry must have been idle before a new one may take its place (`LiveCache`).
 * Beyond it an actor's record is read back at its next step.
 */
const LIVE_ACTORS = 16_384;
const LIVE_IDLE_MS = 60_000;
const live = new WeakMap<Store, LiveCache<Indexed>>();
const liveOf = (store: Store) => {
  let cache = live.get(store);
  if (!cache) live.set(store, (cache = new LiveCache<Indexed>(LIVE_ACTORS, LIVE_IDLE_MS)));
  return cache;
};

/**
 * Folds one actor's steps (in version order) onto the record `from` shows: each step newer than it that
 * changes the state or the tenant, or comes `REFRESH_MS` or more after the step the record shows, makes the
 * record anew; any other step leaves it. Returns the last record made (null: none) and what it shows. The
 * outcome depends on the steps alone, not on how they were batched, so the index rebuilt from the journal
 * equals the one built live. `lookedUp`: the tenant read from the actor's snapshot, for a kind whose steps
 * name none.
 */
function fold(key: string, from: Shown | null, list: JournalEntry[], lookedUp: { account_id?: string; project_id?: string } | null): { made: ActorIndexRecord | null; shown: Shown | null } {
  let current = from;
  let made: ActorIndexRecord | null = null;
  for (const entry of list) {
    if (current && entry.version <= current.version) continue;
    const named = tenantOf(entry);
    const account_id = named.account_id ?? current?.account_id ?? lookedUp?.account_id ?? null;
    const project_id = named.project_id ?? current?.project_id ?? lookedUp?.project_id ?? null;
    const { all, leaves } = statePaths(entry.value);
    const state = leaves.join(' | ');
    const looked = lookedUp !== null || current?.tenant_looked_up === true;
    const same = current && state === current.state && account_id === current.account_id && project_id === current.project_id && looked === (current.tenant_looked_up === true);
    if (same && entry.at - current!.at < REFRESH_MS) continue;
    made = {
      id: key,
      kind: entry.kind,
      actor_id: entry.id,
      account_id,
      project_id,
      value: entry.value,
      state,
      states: all,
      version: entry.version,
      seq: entry.seq,
      updated_at: new Date(entry.at).toISOString(),
      ...(looked ? { tenant_looked_up: true } : {}),
    };
    current = { version: entry.version, at: entry.at, state, account_id, project_id, ...(looked ? { tenant_looked_up: true } : {}) };
  }
  return { made, shown: current };
}

/** The projector that keeps the actor index (idempotent: an entry seen again writes nothing newer). */
export const actorIndexProjector: Projector = {
  name: 'actor-index',
  async apply(entries, store) {
    const index = actorIndex(store);
    const cache = liveOf(store);
    // Each actor's steps of the batch fold into at most one write; the actors' reads and writes are issued
    // together, so a batch costs one group commit, not one per entry.
    const byActor = new Map<string, JournalEntry[]>();
    for (const entry of entries) {
      if (entry.shard < 0 || entry.value === null || entry.value === undefined) continue;
      const list = byActor.get(entry.key);
      if (list) list.push(entry);
      else byActor.set(entry.key, [entry]);
    }
    await Promise.all(
      [...byActor].map(async ([key, list]) => {
        list.sort((a, b) => a.version - b.version);
        const last = list[list.length - 1].version;
        // What this projector kept of the actor stands for the stored record only for the step that directly
        // follows the newest it applied; anything else (a replay, a rebuild, another runner's write) reads
        // the store, as `putNewer` does anyway.
        const cached = cache.take(key);
        let from: Shown | null;
        if (cached && cached.applied === list[0].version - 1) from = cached.shown;
        else {
          const stored = await index.get(key);
          from = stored ? shown(stored) : null;
        }
        if (from && from.version >= last) {
          cache.set(key, { applied: Math.max(last, cached?.applied ?? 0), shown: from });
          return;
        }
        // A kind whose steps name no tenant: read once from its stored snapshot's context, when the first step
        // after the record names none either (whatever later steps say, so that batches do not matter).
        const first = list.find((e) => from === null || e.version > from.version)!;
        const lookUp = !from?.project_id && !from?.tenant_looked_up && !tenantOf(first).project_id;
        const lookedUp = lookUp ? await tenantFromSnapshot(store, key) : null;
        const { made, shown: now } = fold(key, from, list, lookedUp);
        // Refused: a newer record is stored (another runner got further); nothing is remembered then.
        if (made && !(await index.putNewer(made, 'version'))) return;
        if (now) cache.set(key, { applied: last, shown: now });
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
