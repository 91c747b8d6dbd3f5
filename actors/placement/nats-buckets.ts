import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { WorkerInfo } from './types.js';

/** Bucket names under a prefix: `<prefix>_workers` (heartbeats) and `<prefix>_shards` (leases). */
export function bucketNames(prefix: string): { workers: string; shards: string } {
  return { workers: `${prefix}_workers`, shards: `${prefix}_shards` };
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
  names: { workers: string; shards: string };
}

/**
 * Creates (or opens) both buckets with `ttl` and one value per key, single replica (nats-server 2.9 needs
 * 2.9.21 for safe compare-and-set on replicated buckets). Operations on the returned handles time out after
 * `timeoutMs`; an existing bucket with another TTL is refused, since the lease timing relies on it.
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
  const kvm = new Kvm(jetstream(nc, { timeout: timeoutMs }));
  return {
    jsm: await jetstreamManager(nc, { timeout: timeoutMs, checkAPI: false }),
    workers: await kvm.open(names.workers),
    shards: await kvm.open(names.shards),
    names,
  };
}

/** Reads every live heartbeat of the workers bucket, sorted by worker id. */
export async function readWorkers(jsm: JetStreamManager, workers: KV, bucket: string): Promise<WorkerInfo[]> {
  const keys = await liveKeys(jsm, bucket);
  const entries = await Promise.all(keys.map((k) => workers.get(k)));
  const out: WorkerInfo[] = [];
  for (const e of entries) {
    // A key may expire between listing and reading it.
    if (e && e.operation === 'PUT' && e.length > 0) out.push(e.json<WorkerInfo>());
  }
  return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
