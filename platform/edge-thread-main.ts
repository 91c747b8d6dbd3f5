/**
 * The edge thread's program (`edge-thread.ts`): the edge role of the embedded default, reaching the actors of
 * the process's main thread over the port it was given.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { builtinKinds, startRuntime } from '../actors/mod.js';
import { SecretBox } from '../actors/delivery/mod.js';
import { openStore } from '../store/mod.js';
import { openBlobStore } from '../store/blobs/mod.js';
import { loadConfig } from './config.js';
import type { EdgeThreadData, EdgeThreadMessage } from './edge-thread.js';
import { serveEdge } from './edge-role.js';
import { startInvalidationBus } from './invalidation.js';
import { createLogger } from './logger.js';
import { shareMetrics } from './metrics.js';
import { createServices } from './services.js';
import { createStopSteps } from './stop-steps.js';
import { startTelemetry } from './telemetry.js';
import { busOptions, runtimeOptions } from './runtime-options.js';

async function main(data: EdgeThreadData): Promise<void> {
  const config = loadConfig();
  const telemetry = await startTelemetry({ attributes: { 'switchboard.roles': 'edge' } });
  const log = createLogger({ level: config.logLevel, format: config.logFormat, isTTY: data.isTTY, base: { role: 'edge' } });
  const store = await openStore({ dataDir: config.dataDir, mongodbUrl: config.mongodbUrl });
  const services = createServices(store, config.tenancyCache, config.builder);
  services.blobs = await openBlobStore({ dataDir: config.dataDir, mongodbUrl: config.mongodbUrl });
  // The main thread opened it first (and created its key when there was none).
  const webhookSecrets = await SecretBox.open(config.dataDir, config.webhooks.secretsKey);
  const runtime = await startRuntime({ kinds: builtinKinds(), port: data.port, worker: false, ...runtimeOptions(config, log, store) });
  const metrics = shareMetrics(runtime.transport, 'edge', 'main');
  // An operator's write made here reaches the main thread's cache (the actors' real-time config pages) before it answers.
  const bus = await startInvalidationBus(busOptions(config, log, runtime, store, services.tenancy));
  // Serving once the main thread says the process does (`EdgeThread.serve`), not once this thread listens: the
  // process's other roles start after, and may still fail the start (operator.md: 200 once it serves traffic).
  let serving = false;
  const edge = await serveEdge({ config, services, runtime, operatorTokenHash: data.operatorTokenHash, log, webhookSecrets, isServing: () => serving });
  const post = (m: EdgeThreadMessage) => parentPort!.postMessage(m);
  let draining = false;
  parentPort!.on('message', (m: { type: string }) => {
    if (m.type === 'serve' && !draining) serving = true;
    if (m.type !== 'drain') return;
    draining = true;
    serving = false;
    // Every step runs whatever failed before it, as on the main thread (`stop-steps.ts`): a step that threw here
    // would end the thread mid-drain, and the main thread would exit 1 at once, its own store still open.
    const { step } = createStopSteps(log.logger);
    void (async () => {
      await step('edge', () => edge.close());
      await step('metrics', () => metrics.unsubscribe());
      await step('invalidation bus', () => bus.stop());
      await step('runtime', () => runtime.stop());
      await step('blobs', () => services.blobs?.close());
      await step('store', () => store.close());
      await step('telemetry', () => telemetry?.shutdown());
      post({ type: 'drained' });
    })();
  });
  post({ type: 'listening', port: (edge.server.address() as { port: number }).port });
}

main(workerData as EdgeThreadData).catch((err) => {
  // The main thread sees the thread end before it served, and fails its start with this.
  process.stderr.write(`the edge thread failed to start: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  throw err;
});
