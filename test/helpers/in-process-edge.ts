/**
 * The edge built in this process over a runtime without a worker, for the tests that need what a started
 * platform hides: the routes it registers (`onRoute`), or a store whose writes the test can fail or hold
 * (`services`). Everything else is the platform's own: its config's limits, the operator token's hash, the
 * webhook secret box.
 */
import { pino } from 'pino';
import type { FastifyInstance } from 'fastify';
import { builtinKinds, startRuntime, type Runtime } from '../../actors/mod.js';
import { SecretBox } from '../../actors/delivery/mod.js';
import { buildEdge, type EdgeOptions } from '../../gateway/edge/server.js';
import { loadConfig } from '../../platform/config.js';
import { operatorTokenHash } from '../../platform/operator-token.js';
import { createServices } from '../../platform/services.js';
import { openStore, type Store } from '../../store/mod.js';
import { removeDir } from './platform.js';

export interface InProcessEdge {
  store: Store;
  runtime: Runtime;
  edge: FastifyInstance;
  /** Closes the edge, the runtime and the store, and removes the data directory. */
  close: () => Promise<void>;
}

export interface InProcessEdgeOptions {
  /** The operator token the admin API takes. */
  operatorToken: string;
  /** The store the services see (the test's wrapper around the real one); the real store when absent. */
  servicesStore?: (store: Store) => Store;
  onRoute?: EdgeOptions['onRoute'];
}

/** Opens the store in `dir`, starts a runtime without a worker and builds the edge over them (not listening). */
export async function inProcessEdge(dir: string, opts: InProcessEdgeOptions): Promise<InProcessEdge> {
  const config = loadConfig({ DATA_DIR: dir, OPERATOR_TOKEN: opts.operatorToken, LOG_LEVEL: 'silent' });
  const store = await openStore({ dataDir: dir });
  const runtime = await startRuntime({ kinds: builtinKinds(), store, worker: false, shardCount: 4, leaseTtlMs: 3000, passivateAfterMs: 60_000, askTimeoutMs: 1000 });
  const edge = await buildEdge({
    services: createServices(opts.servicesStore ? opts.servicesStore(store) : store),
    runtime,
    operatorTokenHash: await operatorTokenHash(dir, opts.operatorToken, () => undefined),
    logger: pino({ level: 'silent' }),
    isServing: () => true,
    conversationIdleMs: config.conversationIdleMs,
    limits: config.edge,
    externalEvents: config.externalEvents,
    webhooks: { secrets: await SecretBox.open(dir), allowPrivateUrls: false },
    onRoute: opts.onRoute,
  });
  const close = async () => {
    await edge.close();
    await runtime.stop();
    await store.close();
    removeDir(dir);
  };
  return { store, runtime, edge, close };
}
