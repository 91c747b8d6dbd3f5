import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ActorClient } from '../../actors/mod.js';
import { shardOf } from '../../actors/placement/shard.js';
import { connectNatsTransport } from '../../actors/transport/mod.js';
import type { Transport } from '../../actors/transport/types.js';
import type { Cluster } from '../actors.behaviour.js';
import { eventually } from './eventually.js';
import { http } from './http.js';
import { startNats, type NatsServer } from './nats.js';
import { removeDir, startPlatform, type Platform } from './platform.js';

export interface NatsCluster extends Cluster {
  natsUrl: string;
  dataDir: string;
  edge: Platform;
  workers: Platform[];
  /** Socket gateway processes (`ClusterOptions.sockets`). */
  sockets: Platform[];
  shardCount: number;
  transport: Transport;
  /** `GET /admin/v1/runtime` of the edge. */
  runtime(): Promise<{ workers: Array<{ id: string; shards: number[]; liveActors: number }>; unownedShards: number[] }>;
  /** The worker process that owns the shard of `kind/id` now, if any. */
  ownerOf(kind: string, id: string): Promise<Platform | undefined>;
  addWorker(): Promise<Platform>;
  /**
   * Kills the nats-server and starts another on the same port, on its JetStream store (`fresh` false) or on an
   * empty one (`fresh` true: a server whose store directory a reboot emptied).
   */
  restartNats(fresh: boolean): Promise<void>;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  workers: number;
  leaseTtlMs?: number;
  passivateAfterMs?: number;
  shardCount?: number;
  /** Socket gateway processes to start (role `socket`), with extra environment for them. */
  sockets?: number;
  socketEnv?: Record<string, string>;
  /** The NATS URL the socket gateways are given, from the server's (a relay in front of it, say). */
  socketNatsUrl?: (natsUrl: string) => Promise<string>;
  /** Extra environment for every process (edge, workers, sockets). */
  env?: Record<string, string>;
}

/**
 * A real multi-process deployment: a nats-server, an edge process and N worker processes sharing one data
 * dir, plus an actor client over NATS in the test process.
 */
export async function startCluster(o: ClusterOptions): Promise<NatsCluster> {
  let nats: NatsServer = await startNats();
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-cluster-'));
  const shardCount = o.shardCount ?? 16;
  const passivateAfterMs = o.passivateAfterMs ?? 1000;
  const env = {
    NATS_URL: nats.url,
    OPERATOR_TOKEN: `cluster-operator-${randomBytes(8).toString('hex')}`,
    LEASE_TTL_MS: String(o.leaseTtlMs ?? 1500),
    PASSIVATE_AFTER_MS: String(passivateAfterMs),
    SHARDS: String(shardCount),
    ...o.env,
  };
  const started: Platform[] = [];
  const workers: Platform[] = [];
  const addWorker = async () => {
    const w = await startPlatform({ roles: ['worker'], dataDir, env });
    workers.push(w);
    return w;
  };
  const sockets: Platform[] = [];
  let edge: Platform;
  try {
    edge = await startPlatform({ roles: ['edge'], dataDir, env });
    started.push(edge);
    for (let i = 0; i < o.workers; i++) started.push(await addWorker());
    for (let i = 0; i < (o.sockets ?? 0); i++) {
      const natsUrl = o.socketNatsUrl ? await o.socketNatsUrl(nats.url) : nats.url;
      sockets.push(await startPlatform({ roles: ['socket'], dataDir, env: { ...env, NATS_URL: natsUrl, ...o.socketEnv } }));
      started.push(sockets[i]);
    }
    // Start with settled placement: every shard owned and every worker holding some.
    await eventually(async () => {
      const r = (await http(edge.edge, 'GET', '/admin/v1/runtime', { headers: { authorization: `Bearer ${env.OPERATOR_TOKEN}` } })).body;
      return r.unownedShards?.length === 0 && r.workers?.length === o.workers && r.workers.every((w: { shards: number[] }) => w.shards.length > 0);
    }, 20_000, 'placement to settle', 50);
  } catch (err) {
    // A cluster that did not come up leaves nothing running: its processes would keep the file alive.
    for (const p of started) p.child.kill('SIGKILL');
    await nats.stop();
    removeDir(dataDir);
    throw err;
  }
  const transport = await connectNatsTransport(nats.url, { name: 'test-client' });
  const client = new ActorClient(transport, { shardCount, timeoutMs: 30_000 });
  const adminGet = async (path: string) =>
    http(edge.edge, 'GET', `/admin/v1/runtime${path}`, { headers: { authorization: `Bearer ${env.OPERATOR_TOKEN}` } });
  const runtime = async () => (await adminGet('')).body;
  return {
    natsUrl: nats.url,
    dataDir,
    edge,
    workers,
    sockets,
    shardCount,
    transport,
    client,
    passivationDelayMs: passivateAfterMs,
    runtime,
    describe: async (kind, id) => {
      const r = await adminGet(`/actors/${kind}/${encodeURIComponent(id)}`);
      return r.status === 200 ? r.body : null;
    },
    liveActors: async () => (await runtime()).workers.reduce((n: number, w: { liveActors: number }) => n + w.liveActors, 0),
    ownerOf: async (kind, id) => {
      const shard = shardOf(`${kind}/${id}`, shardCount);
      // A shard in handover (released, not yet taken) has no owner for a moment: wait for the next one.
      return eventually(async () => {
        const owner = (await runtime()).workers.find((w: { id: string; shards: number[] }) => w.shards.includes(shard));
        return workers.find((w) => w.worker === owner?.id);
      }, 10_000, "the shard's owner", 50);
    },
    addWorker,
    restartNats: async (fresh) => {
      await nats.kill();
      nats = await startNats(fresh ? { port: nats.port } : { port: nats.port, storeDir: nats.storeDir });
    },
    stop: async () => {
      await transport.close();
      for (const s of sockets) await s.stop();
      for (const w of workers) {
        if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGCONT');
        await w.stop();
      }
      await edge.stop();
      await nats.stop();
      removeDir(dataDir);
    },
  };
}
