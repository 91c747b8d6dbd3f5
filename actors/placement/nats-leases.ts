import { performance } from 'node:perf_hooks';
import { JetStreamApiCodes, JetStreamApiError, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  bucketMissing,
  bucketNames,
  fenceBase,
  held,
  liveKeys,
  openLeaseBuckets,
  purgeKey,
  readWorkers,
  storeIdentity,
  type LeaseBuckets,
} from './nats-buckets.js';
import { DEFAULT_SHARDS, ownerOf, shardOf } from './shard.js';
import { shardLog, type PlacementLog } from './shard-log.js';
import type { Placement, PlacementEvents, WorkerDirectory, WorkerInfo } from './types.js';
import { defaultWorkerId } from './worker-id.js';

/** Options of `createNatsPlacement`. */
export interface NatsPlacementOptions {
  connection: NatsConnection;
  /** Unique per process; default host, pid and a random suffix. */
  workerId?: string;
  /** Same on every worker of a deployment. */
  shardCount?: number;
  /** Lease and heartbeat lifetime; same on every worker (the buckets are created with it). */
  leaseTtlMs?: number;
  /** Buckets are `<prefix>_workers` and `<prefix>_shards`. */
  bucketPrefix?: string;
  /** The actor kinds this worker hosts, published with its heartbeat (the admin API lists them). */
  kinds?: string[];
  /**
   * Receives diagnostics (failed renewals, lost leases); silent by default. Those about shards come one line
   * per message and cause, with the shards it concerns (`shard`, or `shards` and `count`).
   */
  log?: PlacementLog;
  /**
   * The highest fence the snapshot store holds (`SnapshotStore.highestFence`): what a JetStream store without a
   * fence base starts its fences above (`fenceBase`). Default 0: no snapshot was written by an earlier store.
   */
  fenceFloor?: () => Promise<number>;
}

/**
 * `fenceOf` stops vouching for a lease this long after the renewal request that last succeeded was sent:
 * the server stamped that renewal later still, so it cannot have expired yet, and the margin leaves a
 * stalled or partitioned worker time to notice before another worker can take the shard.
 */
const VALID_FRACTION = 0.8;

type LeaseState =
  /** Owned and serving. */
  | 'held'
  /** `events.releasing` runs; still renewed, so the actors can persist with a valid fence. */
  | 'releasing'
  /** Released by the host; the lease key is being deleted. */
  | 'deleting';

interface Lease {
  /** The lease key's revision in the shards bucket; the fence is the fence base plus it. */
  revision: number;
  /** Monotonic local time the last successful create or update was sent. */
  renewedAt: number;
  state: LeaseState;
  /** Settles once `events.acquired` has, so that `releasing` never overtakes it. */
  acquired: Promise<void>;
}

function wrongRevision(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

const shardKey = (shard: number) => `s${shard}`;

/**
 * Placement over NATS JetStream KV leases (see DESIGN.md, Actors). Every leaseTtlMs/3 a balancing round
 * puts this worker's heartbeat, reads the live workers and, per shard, computes the rendezvous owner among
 * them: it renews the leases it keeps (`update` at its revision; the fence is the new revision plus the store's
 * fence base, `fenceBase`), releases those that belong to another live worker, and `create`s those that belong
 * to it. A dead worker's keys expire after the TTL and the desired owners take them within about one more round.
 * A round that finds the buckets' streams gone or replaced (the server restarted on an empty JetStream store)
 * drops every shard and opens the buckets again, with the new store's fence base.
 */
export function createNatsPlacement(options: NatsPlacementOptions): Placement {
  const nc = options.connection;
  const workerId = options.workerId ?? defaultWorkerId();
  const shardCount = options.shardCount ?? DEFAULT_SHARDS;
  const ttl = options.leaseTtlMs ?? 3000;
  const prefix = options.bucketPrefix ?? 'sb';
  const log = options.log ?? (() => {});
  const logShard = shardLog(log);
  const interval = Math.max(1, Math.floor(ttl / 3));
  const fenceFloor = options.fenceFloor ?? (() => Promise.resolve(0));
  const startedAt = new Date().toISOString();

  const leases = new Map<number, Lease>();
  const releases = new Set<Promise<void>>();
  let buckets: LeaseBuckets | undefined;
  /** Added to a lease's revision to make its fence: the same for every worker of one JetStream store. */
  let base = 0;
  /** The buckets' streams are gone or were replaced: the next round opens them again before anything else. */
  let replaced = false;
  let events: PlacementEvents | undefined;
  let liveActors = 0;
  let timer: NodeJS.Timeout | undefined;
  let inflight: Promise<void> = Promise.resolve();
  /** No heartbeats or acquisitions any more; every lease is being released. */
  let stopping = false;
  /** No rounds any more. */
  let stopped = false;
  let stopDone: Promise<void> | undefined;

  const fenceValid = (lease: Lease) => performance.now() - lease.renewedAt < ttl * VALID_FRACTION;

  function lose(shard: number, lease: Lease, why: string, err?: unknown): void {
    if (leases.get(shard) !== lease) return;
    leases.delete(shard);
    logShard('placement: lease lost', shard, { workerId, why, error: err === undefined ? undefined : String(err) });
    try {
      events!.lost(shard);
    } catch (thrown) {
      logShard('placement: lost handler threw', shard, { workerId, error: String(thrown) });
    }
  }

  async function renew(shard: number, lease: Lease): Promise<void> {
    const sentAt = performance.now();
    try {
      const revision = await buckets!.shards.update(shardKey(shard), workerId, lease.revision);
      if (leases.get(shard) !== lease) return;
      lease.revision = revision;
      lease.renewedAt = sentAt;
    } catch (err) {
      // Another revision means the key expired or another worker holds it. Other failures (timeout,
      // disconnection) may be passing; the lease is given up once it must have expired anyway.
      if (wrongRevision(err)) lose(shard, lease, 'taken or expired', err);
      else if (performance.now() - lease.renewedAt >= ttl) lose(shard, lease, 'not renewed within the TTL', err);
      else logShard('placement: renewal failed, retrying', shard, { workerId, error: String(err) });
    }
  }

  async function acquire(shard: number): Promise<void> {
    const sentAt = performance.now();
    let revision: number;
    try {
      revision = await buckets!.shards.create(shardKey(shard), workerId);
    } catch (err) {
      // Another worker's lease still lives: it releases the shard or its lease expires.
      if (!wrongRevision(err)) logShard('placement: acquisition failed', shard, { workerId, error: String(err) });
      return;
    }
    const lease: Lease = { revision, renewedAt: sentAt, state: 'held', acquired: Promise.resolve() };
    leases.set(shard, lease);
    lease.acquired = (async () => {
      try {
        await events!.acquired(shard, base + revision);
      } catch (err) {
        logShard('placement: acquired handler failed', shard, { workerId, error: String(err) });
      }
    })();
  }

  /** Lets the host passivate the shard, then deletes the lease so the next owner can take it at once. */
  function release(shard: number, lease: Lease): void {
    lease.state = 'releasing';
    const held = buckets!;
    const task = (async () => {
      await lease.acquired;
      try {
        await events!.releasing(shard);
      } catch (err) {
        logShard('placement: releasing handler failed', shard, { workerId, error: String(err) });
      }
      if (leases.get(shard) !== lease) return;
      lease.state = 'deleting';
      // A renewal under way changes the revision the delete must name.
      await inflight;
      // Lost meanwhile, or its store replaced: the revision names nothing in the buckets open now.
      if (leases.get(shard) !== lease || buckets !== held) return;
      try {
        await buckets!.shards.delete(shardKey(shard), { previousSeq: lease.revision });
      } catch (err) {
        // Taken or expired meanwhile, or unreachable: then the key expires after the TTL.
        logShard('placement: lease delete failed', shard, { workerId, error: String(err) });
      }
      if (leases.get(shard) === lease) leases.delete(shard);
    })();
    releases.add(task);
    void task.finally(() => releases.delete(task));
  }

  function heartbeat(): WorkerInfo {
    return {
      id: workerId,
      shards: owned(),
      liveActors,
      kinds: options.kinds ?? [],
      startedAt,
      seenAt: new Date().toISOString(),
    };
  }

  /** Puts this worker's heartbeat; failures are retried next round. */
  async function beat(): Promise<void> {
    try {
      await buckets!.workers.put(workerId, JSON.stringify(heartbeat()));
    } catch (err) {
      log('placement: heartbeat failed', { workerId, error: String(err) });
    }
  }

  /** The live workers, this one included even before its first heartbeat lands; null when unreadable. */
  async function liveWorkers(): Promise<string[] | null> {
    try {
      const keys = await liveKeys(buckets!.jsm, buckets!.names.workers);
      return keys.includes(workerId) ? keys : [...keys, workerId];
    } catch (err) {
      if (bucketMissing(err)) replaced = true;
      else log('placement: reading workers failed', { workerId, error: String(err) });
      return null;
    }
  }

  /** Notes whether the lease and fence streams are still the ones opened (an unreachable server says nothing). */
  async function checkStore(): Promise<void> {
    try {
      if ((await storeIdentity(buckets!.jsm, buckets!.names)) !== buckets!.identity) replaced = true;
    } catch (err) {
      if (bucketMissing(err)) replaced = true;
    }
  }

  /** Opens (or creates) the buckets and reads (or sets) the fence base of their store. */
  async function open(): Promise<void> {
    const opened = await openLeaseBuckets(nc, prefix, ttl, Math.max(250, Math.floor(ttl / 2)));
    base = await fenceBase(opened.fences, fenceFloor, ttl);
    buckets = opened;
  }

  /**
   * The JetStream store that held the leases was replaced: every lease of it is gone, whatever this worker
   * believed, and its revisions start again. Drops the shards and opens the new store's buckets.
   */
  async function reopen(): Promise<void> {
    for (const [shard, lease] of [...leases]) lose(shard, lease, 'lease store replaced');
    try {
      await open();
      replaced = false;
      log('placement: lease store replaced, buckets opened again', { workerId, fenceBase: base });
    } catch (err) {
      log('placement: opening the replaced lease store failed, retrying', { workerId, error: String(err) });
    }
  }

  async function round(): Promise<void> {
    if (replaced && !stopping) {
      await reopen();
      if (replaced) return;
    }
    // A stopping worker neither announces itself nor takes shards: it only renews what it releases.
    const [, live] = stopping ? [undefined, null] : await Promise.all([beat(), liveWorkers(), checkStore()]);
    if (replaced) return;
    const work: Promise<void>[] = [];
    for (const [shard, lease] of leases) {
      if (lease.state === 'deleting') continue;
      if (lease.state === 'held' && (stopping || (live !== null && ownerOf(shard, live, shardCount) !== workerId))) {
        release(shard, lease);
      }
      work.push(renew(shard, lease));
    }
    if (live !== null) {
      for (let shard = 0; shard < shardCount; shard++) {
        if (!leases.has(shard) && ownerOf(shard, live, shardCount) === workerId) work.push(acquire(shard));
      }
    }
    await Promise.all(work);
  }

  /** Runs a round now, after the one under way if any; rounds never overlap. */
  function runRound(): Promise<void> {
    inflight = inflight.then(round).catch((err: unknown) => {
      log('placement: round failed', { workerId, error: String(err) });
    });
    return inflight;
  }

  function schedule(delay: number): void {
    if (stopped) return;
    timer = setTimeout(() => {
      const began = performance.now();
      void runRound().then(() => schedule(Math.max(0, interval - (performance.now() - began))));
    }, delay);
  }

  function owned(): number[] {
    const out: number[] = [];
    for (const [shard, lease] of leases) if (lease.state !== 'deleting') out.push(shard);
    return out.sort((a, b) => a - b);
  }

  async function stop(): Promise<void> {
    stopping = true;
    // Others stop counting on this worker first, so that they take each shard as soon as it is released.
    await inflight;
    try {
      await purgeKey(buckets!.jsm, buckets!.names.workers, workerId);
    } catch (err) {
      log('placement: heartbeat removal failed', { workerId, error: String(err) });
    }
    // Rounds go on meanwhile, renewing the leases being released.
    await runRound();
    while (releases.size > 0) await Promise.all(releases);
    stopped = true;
    clearTimeout(timer);
    await inflight;
    logShard.flush();
  }

  return {
    workerId,
    shardCount,
    shardOf: (key) => shardOf(key, shardCount),
    fenceOf(shard) {
      const lease = leases.get(shard);
      return lease && lease.state !== 'deleting' && fenceValid(lease) ? base + lease.revision : null;
    },
    owned,
    async start(handlers) {
      if (events) throw new Error('placement already started');
      events = handlers;
      await open();
      // A closed connection can renew nothing: the leases are as good as gone.
      void nc.closed().then(() => {
        if (stopped) return;
        stopped = true;
        clearTimeout(timer);
        for (const [shard, lease] of [...leases]) lose(shard, lease, 'connection closed');
        logShard.flush();
      });
      await runRound();
      schedule(interval);
    },
    stop() {
      if (!buckets) return Promise.resolve();
      stopDone ??= stop();
      return stopDone;
    },
    reportLiveActors(count) {
      liveActors = count;
    },
  };
}

/**
 * Lists the workers of a NATS deployment from their heartbeats, from any role (it needs only the
 * connection). No workers bucket yet means no workers.
 */
export function createNatsWorkerDirectory(connection: NatsConnection, bucketPrefix = 'sb'): WorkerDirectory {
  const names = bucketNames(bucketPrefix);
  return {
    async workers() {
      const jsm = await jetstreamManager(connection, { checkAPI: false });
      const kvm = new Kvm(connection);
      try {
        const workers = await readWorkers(jsm, await kvm.open(names.workers), names.workers);
        // Heartbeats say what a worker believed it owned at its last round (a worker waking from a stall
        // still lists shards it has lost); the lease bucket says who owns each shard now.
        const leases = await kvm.open(names.shards);
        const owners = new Map<string, number[]>();
        for (const key of await liveKeys(jsm, names.shards)) {
          const entry = await leases.get(key);
          if (!held(entry)) continue;
          const owner = entry.string();
          owners.set(owner, [...(owners.get(owner) ?? []), Number(key.slice(1))]);
        }
        return workers.map((w) => ({ ...w, shards: (owners.get(w.id) ?? []).sort((a, b) => a - b) }));
      } catch (err) {
        if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) return [];
        throw err;
      }
    },
    // Two stream-info requests instead of reading every record. A key lives in a bucket while its heartbeat or
    // lease does; a released lease leaves a delete marker that still lists it until the TTL passes, so a
    // shard given up reads as owned for at most one TTL longer than in `workers()`.
    async ownership() {
      const jsm = await jetstreamManager(connection, { checkAPI: false });
      try {
        const [workers, shards] = await Promise.all([liveKeys(jsm, names.workers), liveKeys(jsm, names.shards)]);
        return { liveWorkers: workers.length, ownedShards: shards.map((k) => Number(k.slice(1))).sort((a, b) => a - b) };
      } catch (err) {
        if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) return { liveWorkers: 0, ownedShards: [] };
        throw err;
      }
    },
  };
}
