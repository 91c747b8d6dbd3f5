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
