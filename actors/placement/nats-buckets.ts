import { JetStreamApiCodes, JetStreamApiError, jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm, type KV, type KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { WorkerInfo } from './types.js';

/** The buckets of a deployment, by role. */
export interface BucketNames {
  /** Heartbeats, with the lease TTL. */
  workers: string;
  /** Leases (key `s<n>` → owner), with the lease TTL. */
  shards: string;
  /** The fence base of this JetStream store's lease revisions (key `base`), kept without a TTL. */
  fences: string;
}

/** Bucket names under a prefix: `<prefix>_workers`, `<prefix>_shards` and `<prefix>_fences`. */
export function bucketNames(prefix: string): BucketNames {
  return { workers: `${prefix}_workers`, shards: `${prefix}_shards`, fences: `${prefix}_fences` };
}

/** Whether a read key holds a value (not a delete or purge marker, not emptied). */
export function held(entry: KvEntry | null): entry is KvEntry {
  return entry !== null && entry.operation === 'PUT' && entry.length > 0;
}

/** The keys of a bucket that hold a value now: the subjects its stream still has messages on. */
export async function liveKeys(jsm: JetStreamManager, bucket: string): Promise<string[]> {
  // One stream-info request instead of the ephemeral consumer `kv.keys()` creates; the server drops
  // expired messages, so a key whose TTL passed is not listed.
  const info = await jsm.streams.info(`KV_${bucket}`, { subjects_filter: '>' });
  const prefix = `$KV.${bucket}.`;
  return Object.keys(info.state.subjects ?? {}).map((s) => s.slice(prefix.length));
}

/** Removes a key without the delete marker `kv.delete` leaves, so `liveKeys` stops listing it at once. */
export async function purgeKey(jsm: JetStreamManager, bucket: string, key: string): Promise<void> {
  await jsm.streams.purge(`KV_${bucket}`, { filter: `$KV.${bucket}.${key}` });
}

export interface LeaseBuckets {
  jsm: JetStreamManager;
  workers: KV;
  shards: KV;
  fences: KV;
  names: BucketNames;
  /**
   * Which lease and fence streams these handles write: their creation times. Another value later means the
   * JetStream store was replaced (a server restarted on an empty store directory, a bucket deleted), and with
   * it the lease revisions started again at 1. The heartbeat bucket holds no fence: a missing one is noticed
   * when its keys are read (`liveKeys`), and one created again by another worker serves as well.
   */
  identity: string;
}

/**
 * Creates (or opens) the lease and heartbeat buckets with `ttl` and the fences bucket without one, one value per
 * key, single replica (nats-server 2.9 needs 2.9.21 for safe compare-and-set on replicated buckets). Operations
 * on the returned handles time out after `timeoutMs`; an existing bucket with another TTL is refused, since the
 * lease timing relies on it.
 */
export async function openLeaseBuckets(
  nc: NatsConnection,
  prefix: string,
  ttlMs: number,
  timeoutMs: number,
): Promise<LeaseBuckets> {
  const names = bucketNames(prefix);
  const setup = new Kvm(nc);
  for (const name of [names.workers, names.shards]) {
    const kv = await setup.create(name, { ttl: ttlMs, history: 1, replicas: 1 });
    const status = await kv.status();
    if (status.ttl !== ttlMs) {
      throw new Error(`bucket ${name} exists with a TTL of ${status.ttl} ms, not ${ttlMs} ms: every worker must use the same lease TTL`);
    }
  }
  await setup.create(names.fences, { history: 1, replicas: 1 });
  const kvm = new Kvm(jetstream(nc, { timeout: timeoutMs }));
  const jsm = await jetstreamManager(nc, { timeout: timeoutMs, checkAPI: false });
  return {
    jsm,
    workers: await kvm.open(names.workers),
    shards: await kvm.open(names.shards),
    fences: await kvm.open(names.fences),
    names,
    identity: await storeIdentity(jsm, names),
  };
}

/** The lease and fence streams' creation times (`LeaseBuckets.identity`); throws `StreamNotFound` for a missing one. */
export async function storeIdentity(jsm: JetStreamManager, names: BucketNames): Promise<string> {
  const infos = await Promise.all([names.shards, names.fences].map((b) => jsm.streams.info(`KV_${b}`)));
  return infos.map((i) => i.created).join(' ');
}

/** Whether an error says a bucket's stream does not exist. */
export function bucketMissing(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound;
}

const BASE_KEY = 'base';

/**
 * The number every lease revision of this JetStream store is added to, to make a fence. A store's revisions
 * start at 1, but the snapshots keep the fences of the stores before it (a JetStream store directory in `/tmp`
 * that a reboot emptied, an embedded run in between): without a base, their writes would be refused as stale until
 * the revisions passed them. The first worker to find no base sets it to `floor()` (the snapshot store's highest
 * fence), the others read it. Before reading the floor it waits `settleMs` (the lease TTL) when any fence is
 * stored: a worker still holding a lease of the store that was lost stops writing within 0.8 × TTL of its last
 * renewal, so the floor read after the wait is above every fence it could still write with.
 */
export async function fenceBase(fences: KV, floor: () => Promise<number>, settleMs: number): Promise<number> {
  const found = await fences.get(BASE_KEY);
  if (held(found)) return Number(found.string());
  if ((await floor()) > 0) await new Promise((resolve) => setTimeout(resolve, settleMs));
  const base = await floor();
  try {
    await fences.create(BASE_KEY, String(base));
    return base;
  } catch (err) {
    // Another worker set it first: every worker of the store must add the same base.
    const set = await fences.get(BASE_KEY);
    if (held(set)) return Number(set.string());
    throw err;
  }
}

/** Reads every live heartbeat of the workers bucket, sorted by worker id. */
export async function readWorkers(jsm: JetStreamManager, workers: KV, bucket: string): Promise<WorkerInfo[]> {
  const keys = await liveKeys(jsm, bucket);
  const entries = await Promise.all(keys.map((k) => workers.get(k)));
  const out: WorkerInfo[] = [];
  for (const e of entries) {
    // A key may expire between listing and reading it.
    if (held(e)) out.push(e.json<WorkerInfo>());
  }
  return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
