import { createHash } from 'node:crypto';

/** Default number of shards. Fixed for the life of a deployment: changing it moves every actor. */
export const DEFAULT_SHARDS = 64;

/**
 * The shard of an actor key: 32-bit FNV-1a of its UTF-16 code units, modulo the shard count. It runs on
 * every ask, so it is a cheap arithmetic hash rather than a cryptographic one; it only has to be stable
 * and spread keys evenly.
 */
export function shardOf(key: string, shardCount: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shardCount;
}

/**
 * The worker a shard belongs to among `workers`: rendezvous (highest-random-weight) hashing with bounded loads,
 * so that shards spread evenly (no worker holds more than `ceil(shardCount / workers)`; plain rendezvous
 * hashing gave two workers 39 and 25 of 64). Every node computes the same answer from the same worker list;
 * when a worker joins or leaves, most shards keep their owner.
 */
export function ownerOf(shard: number, workers: string[], shardCount: number = DEFAULT_SHARDS): string | null {
  if (workers.length === 0 || shard < 0 || shard >= shardCount) return null;
  return shardOwners(workers, shardCount)[shard];
}

/** The last assignment computed (placement asks for every shard of the same worker list in turn). */
let lastOwners: { key: string; owners: string[] } | null = null;

/**
 * Every shard's owner: each (shard, worker) pair weighted by a hash of both, taken heaviest first, and a
 * shard goes to the worker of its heaviest pair that still has room. With room for all, every shard goes to
 * its rendezvous owner; the bound only moves the shards a crowded worker would have taken past its share.
 */
export function shardOwners(workers: string[], shardCount: number): string[] {
  const sorted = [...new Set(workers)].sort();
  const key = `${shardCount}\u0000${sorted.join('\u0000')}`;
  if (lastOwners?.key === key) return lastOwners.owners;
  const pairs: Array<{ shard: number; worker: string; weight: number }> = [];
  for (let shard = 0; shard < shardCount; shard++) {
    for (const worker of sorted) pairs.push({ shard, worker, weight: createHash('sha1').update(`${worker}:${shard}`).digest().readUInt32BE(0) });
  }
  pairs.sort((a, b) => b.weight - a.weight || (a.worker < b.worker ? -1 : a.worker > b.worker ? 1 : a.shard - b.shard));
  const room = Math.ceil(shardCount / Math.max(1, sorted.length));
  const held = new Map<string, number>();
  const owners: string[] = new Array(shardCount);
  for (const { shard, worker } of pairs) {
    if (owners[shard] !== undefined || (held.get(worker) ?? 0) >= room) continue;
    owners[shard] = worker;
    held.set(worker, (held.get(worker) ?? 0) + 1);
  }
  lastOwners = { key, owners };
  return owners;
}
