import { createHash } from 'node:crypto';

/** Default number of shards. Fixed for the life of a deployment: changing it moves every actor. */
export const DEFAULT_SHARDS = 64;

/** The shard of an actor key: the first 32 bits of its SHA-1, modulo the shard count. */
export function shardOf(key: string, shardCount: number): number {
  return createHash('sha1').update(key).digest().readUInt32BE(0) % shardCount;
}

/**
 * Rendezvous (highest-random-weight) hashing: the worker a shard belongs to among `workers`. Every node
 * computes the same answer from the same worker list; when a worker joins, only the shards it wins move.
 */
export function ownerOf(shard: number, workers: string[]): string | null {
  let best: string | null = null;
  let bestWeight = -1;
  for (const w of workers) {
    const weight = createHash('sha1').update(`${w}:${shard}`).digest().readUInt32BE(0);
    if (weight > bestWeight || (weight === bestWeight && best !== null && w < best)) {
      best = w;
      bestWeight = weight;
    }
  }
  return best;
}
