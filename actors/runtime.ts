import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { MessagePort } from 'node:worker_threads';
import type { Store } from '../store/mod.js';
import { admitMachine } from './actor-system.js';
import { ActorClient } from './client.js';
import { RuntimeHealth, watchPlacement, type HealthLog } from './health.js';
import { Host } from './host.js';
import { builtinKinds, type ActorKind } from './kinds.js';
import { createLocalPlacement, createNatsPlacement, createNatsWorkerDirectory } from './placement/mod.js';
import { remoteDirectory, serveDirectory } from './placement/remote-directory.js';
import { bytesOf } from './protocol.js';
import type { WorkerDirectory, WorkerInfo } from './placement/types.js';
import { Projections, type ProjectionOptions } from './projection/projections.js';
import { connectNatsTransport, createInprocTransport, portTransport, servePort, type NatsWaitLog } from './transport/mod.js';
import type { Transport } from './transport/types.js';

export interface RuntimeOptions {
  store: Store;
  /** NATS server URL; unset means the in-process transport (one process hosts everything). */
  natsUrl?: string;
  /**
   * Over NATS, the start waits for a server that is not reachable yet; aborting this signal (the process is
   * told to stop meanwhile) ends the wait: `startRuntime` rejects with the signal's reason.
   */
  signal?: AbortSignal;
  /** Where that wait is told (a warning every 30 s while it lasts). */
  natsLog?: NatsWaitLog;
  /**
   * Reach the actors of another thread of this process over this port (its runtime's `servePort`) instead:
   * the embedded default's edge thread. Not with `natsUrl` nor `worker`.
   */
  port?: MessagePort;
  /** Host actors in this process (the `worker` role). */
  worker: boolean;
  shardCount: number;
  leaseTtlMs: number;
  passivateAfterMs: number;
  askTimeoutMs: number;
  /** See `HostOptions.wakeIndexRefreshMs` (tests shorten it). */
  wakeIndexRefreshMs?: number;
  /** See `HostOptions.wakeScanLimit` (tests lower it). */
  wakeScanLimit?: number;
  kinds?: Map<string, ActorKind>;
  log?: (msg: string, extra?: object) => void;
  /** Where failures that lose something are logged at error level (an entry a projection set aside); `log` when absent. */
  errorLog?: (msg: string, extra?: object) => void;
  /** Where degradation causes are logged (warn when one appears, info when it clears). */
  healthLog?: HealthLog;
  /**
   * The projections: every process can report their status; a worker runs the runner (in a thread) for
   * the partitions of the shards it holds. Unset: no projections (the runtime's own tests).
   */
  projections?: ProjectionOptions;
}

/** The actor runtime of one process: how it reaches actors, and the host when it is a worker. */
export interface Runtime {
  transport: Transport;
  client: ActorClient;
  /** The cluster's workers, for the admin API. */
  directory: WorkerDirectory;
  /** Set in a worker. */
  host: Host | null;
  workerId: string | null;
  shardCount: number;
  /** The kinds this process knows; the kinds a worker hosts are in its `WorkerInfo` (`directory`). */
  kinds: Map<string, ActorKind>;
  /** What keeps this process from reaching actors now (no live worker, unowned shards): `/healthz`, admin. */
  health: RuntimeHealth;
  /** The projections' status (and in a worker their runner); null without `RuntimeOptions.projections`. */
  projections: Projections | null;
  /**
   * Serves another thread's runtime (started with `RuntimeOptions.port`, the other end of `port`) with this
   * one's in-process transport, until that thread closes it or this runtime stops. In-process runtimes only.
   */
  servePort(port: MessagePort): void;
  /**
   * Stops hosting (handing shards over), then the projections' thread, then closes the transport. Every step
   * runs, whatever failed before it; then it rejects with the failure (an `AggregateError` for several).
   */
  stop(): Promise<void>;
}

/** Starts the transport, and in a worker the placement and the host. */
export async function startRuntime(o: RuntimeOptions): Promise<Runtime> {
  const kinds = o.kinds ?? builtinKinds();
  for (const kind of kinds.values()) admitMachine(kind.name, kind.machine);
  if (o.port && (o.natsUrl || o.worker)) throw new Error('a runtime reached over a port hosts no actors and uses no NATS');
  // What another thread or process sends may follow a write it saw committed: this thread reads afresh first.
  const arrived = () => o.store.refresh();
  const nats = o.natsUrl ? await connectNatsTransport(o.natsUrl, { name: `switchboard-${process.pid}`, arrived, signal: o.signal, log: o.natsLog }) : null;
  const transport: Transport = nats ?? (o.port ? portTransport(o.port, arrived) : createInprocTransport());
  /** What to stop with the runtime: the directory answered and the ports served to other threads. */
  const serving: Array<() => void> = [];
  const workerId = o.worker ? `w-${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}` : null;
  let host: Host | null = null;
  let directory: WorkerDirectory;
  const projections = o.projections ? await Projections.open(o.store, o.projections, o.shardCount) : null;
  let stopOwnership = () => {};
  let ownershipChanged = () => {};
  if (workerId) {
    const hosted = [...kinds.keys()];
    const placement = nats
      ? createNatsPlacement({
          connection: nats.connection,
          workerId,
          shardCount: o.shardCount,
          leaseTtlMs: o.leaseTtlMs,
          kinds: hosted,
          log: o.log,
          fenceFloor: () => o.store.snapshots.highestFence(),
        })
      : createLocalPlacement({ workerId, shardCount: o.shardCount, kinds: hosted, fence: await o.store.snapshots.highestFence() });
    host = new Host({
      transport,
      placement,
      snapshots: o.store.snapshots,
      journal: o.store.journal,
      kinds,
      passivateAfterMs: o.passivateAfterMs,
      wakeIndexRefreshMs: o.wakeIndexRefreshMs,
      wakeScanLimit: o.wakeScanLimit,
      log: o.log,
      committed: projections ? () => projections.wake() : undefined,
      shardsChanged: () => ownershipChanged(),
    });
    await host.start();
    if (projections) {
      // Partition p is applied by the worker holding shard p's lease: adding workers spreads the partitions.
      const served = host;
      const owned = () => served.servedShards().filter((s) => s < projections.partitions);
      await projections.startRunner(owned(), workerId, o.log, o.errorLog);
      ownershipChanged = () => projections.setOwned(owned());
      const timer = setInterval(() => projections.setOwned(owned()), Math.max(100, Math.floor(o.leaseTtlMs / 3)));
      timer.unref();
      stopOwnership = () => clearInterval(timer);
    }
    const started = new Date().toISOString();
    const local = host;
    directory = nats
      ? createNatsWorkerDirectory(nats.connection)
      : {
          workers: async (): Promise<WorkerInfo[]> => [
            { id: workerId, shards: placement.owned(), liveActors: local.liveActors, kinds: hosted, startedAt: started, seenAt: new Date().toISOString() },
          ],
        };
    // The threads this runtime serves (`servePort`) see this worker through it.
    if (!nats) {
      const sub = serveDirectory(transport, directory);
      serving.push(() => sub.unsubscribe());
    }
  } else {
    directory = nats ? createNatsWorkerDirectory(nats.connection) : o.port ? remoteDirectory(transport, o.askTimeoutMs) : { workers: async () => [] };
  }
  const health = new RuntimeHealth(o.healthLog);
  // Read the directory about as often as workers renew their leases: a dead worker shows within a TTL or two.
  const stopWatch = watchPlacement({ directory, shardCount: o.shardCount, health, intervalMs: o.leaseTtlMs });
  return {
    transport,
    client: new ActorClient(transport, { shardCount: o.shardCount, timeoutMs: o.askTimeoutMs, health }),
    directory,
    host,
    workerId,
    shardCount: o.shardCount,
    kinds,
    health,
    projections,
    servePort: (port) => {
      if (transport.kind !== 'inproc') throw new Error(`a ${transport.kind} runtime serves no port`);
      serving.push(servePort(transport, port, bytesOf, arrived).stop);
    },
    stop: async () => {
      // Each step runs whatever failed before it: a projection thread left running reads a store the caller
      // closes next (a worker once crashed so, its host's stop having thrown in a drain after a NATS outage).
      const failed: Array<{ step: string; err: unknown }> = [];
      const step = async (name: string, f: () => unknown) => {
        try {
          await f();
        } catch (err) {
          failed.push({ step: name, err });
        }
      };
      await step('placement watch', stopWatch);
      await step('projection ownership', stopOwnership);
      for (const stop of serving) await step('served port', stop);
      await step('host', () => host?.stop());
      await step('projections', () => projections?.stop());
      await step('transport', () => transport.close());
      // The caller still learns of it (the drain logs it): the first failure, or all of them.
      if (failed.length === 1) throw failed[0].err;
      if (failed.length > 1) {
        const what = failed.map(({ step, err }) => `${step}: ${err instanceof Error ? err.message : String(err)}`).join('; ');
        throw new AggregateError(failed.map((f) => f.err), `the runtime's stop failed in ${failed.length} steps (${what})`);
      }
    },
  };
}
