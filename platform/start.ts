/**
 * Starts the platform's roles (`main.ts`, the entry, loads this once it listens for the stop signals): `edge`,
 * `socket`, `worker` and `media` (the Procfile's processes, which need `NATS_URL` to reach each other); no role
 * (what `npm start` does) runs every role in one process on the embedded defaults.
 */
import { onEnvironmentPanic, openStore, type Store } from '../store/mod.js';
import { builtinKinds, startRuntime } from '../actors/mod.js';
import { conversationKind, startExternalWaitSweeps } from '../actors/conversation/mod.js';
import { sessionKind } from '../actors/session/mod.js';
import { callKind } from '../actors/call/mod.js';
import { deliveryKind, SecretBox, startDeliveryLogSweeps } from '../actors/delivery/mod.js';
import { alertRuleKind } from '../actors/alert-rule/mod.js';
import { countConnections, countExpiredEvents, countLiveActors, sandboxCalls, serveMetrics, shareMetrics, webhookAttempts } from './metrics.js';
import type { Runtime } from '../actors/mod.js';
import { createFunctionSandbox, type FunctionSandbox } from '../actors/functions/mod.js';
import { createResponder } from '../actors/responder/mod.js';
import { startSocketGateway, type SocketGateway } from '../gateway/socket/server.js';
import { startMediaGateway, type MediaGateway } from '../gateway/media/server.js';
import { answerDialRequests } from '../gateway/media/dial.js';
import { speechFromEnv } from '../gateway/media/speech/from-env.js';
import { Recordings } from '../gateway/media/recordings/recordings.js';
import { openBlobStore, type BlobStore } from '../store/blobs/mod.js';
import { loadConfig, WEAK_OPERATOR_TOKEN } from './config.js';
import { createLogger } from './logger.js';
import { operatorTokenHash } from './operator-token.js';
import { createServices } from './services.js';
import { startInvalidationBus } from './invalidation.js';
import { startTelemetry } from './telemetry.js';
import { busOptions, runtimeOptions } from './runtime-options.js';
import { serveEdge } from './edge-role.js';
import { startEdgeThread, type EdgeThread } from './edge-thread.js';
import { StoppedWhileStarting, type StartSignals } from './start-signals.js';
import { createStopSteps, type StopSteps } from './stop-steps.js';
import { checkDataDir, checkHost } from './start-checks.js';
import { urlHost } from './url-host.js';

const ROLES = ['edge', 'socket', 'worker', 'media'] as const;
/** How long a fatal exit waits for the store to close before it kills the process (`fatalExit`). */
const FATAL_CLOSE_MS = 5_000;
type Role = (typeof ROLES)[number];

/**
 * Starts the roles named on the command line. `startSignals` listen from before this module loaded until the
 * drain's own listeners take over: SIGTERM and SIGINT meanwhile stop the start, which closes what it opened and
 * exits 0, as a drain would (start-signals.ts).
 */
export async function start(startSignals: StartSignals): Promise<void> {
  const asked = process.argv.slice(2).filter((a) => a !== 'all');
  const unknown = asked.filter((a) => !(ROLES as readonly string[]).includes(a));
  if (unknown.length) throw new Error(`unknown role(s) ${unknown.join(', ')}; roles are ${ROLES.join(', ')}`);
  const roles = new Set<Role>(asked.length ? (asked as Role[]) : ROLES);

  const config = loadConfig();
  // The embedded default serves HTTP from a thread of its own, on the other core (platform/edge-thread.ts).
  const edgeThreaded = config.edgeThread && !config.natsUrl && roles.has('edge') && roles.has('worker');
  // Traces only when the OTEL variables configure an exporter (platform/telemetry.ts).
  const telemetry = await startTelemetry({ attributes: { 'switchboard.roles': [...roles].join('+') } });
  const log = createLogger({ level: config.logLevel, format: config.logFormat, isTTY: !!process.stdout.isTTY, base: { role: [...roles].join('+') } });
  const logger = log.logger;
  /** What the start has opened so far: every stop closes it, the drain's and one while starting. */
  const opened: { store?: Store; blobs?: BlobStore; sandbox?: FunctionSandbox } = {};
  /**
   * The last steps of every stop, a drain's or one while starting: what the start opened first, closed last;
   * then the exit, 1 only if the store did not close.
   */
  const closeAndExit = async ({ step, storeClosed }: StopSteps, closed = () => {}): Promise<never> => {
    await step('sandbox', () => opened.sandbox?.close());
    await step('blobs', () => opened.blobs?.close());
    await step('store', () => opened.store?.close());
    await step('telemetry', () => telemetry?.shutdown());
    closed();
    process.exit(storeClosed() ? 0 : 1);
  };
  /**
   * Ends the process on a failure it cannot serve through (its edge thread died, the embedded store's environment
   * is unusable): the fatal line, then the store closed (at most `FATAL_CLOSE_MS`) before the exit, code 1. Not
   * `process.exit` at once: an exit while lmdb-js's writer thread waits on this thread to finish a batch joins
   * that thread for ever (docs/storage.md, "A full disk"), with the ports held and no signal answered. A store
   * that does not close in time leaves SIGKILL, which no thread can hold up.
   */
  let fatal = false;
  const fatalExit = (msg: string, err: unknown): void => {
    if (fatal) return;
    fatal = true;
    logger.fatal({ err: String(err) }, msg);
    const kill = setTimeout(() => {
      process.stderr.write(`switchboard: the store did not close within ${FATAL_CLOSE_MS} ms after a fatal failure; killing the process\n`);
      process.kill(process.pid, 'SIGKILL');
    }, FATAL_CLOSE_MS);
    void Promise.resolve(opened.store?.close())
      .catch(() => {})
      .then(() => {
        clearTimeout(kill);
        process.exit(1);
      });
  };
  // A write past the file size limit (RLIMIT_FSIZE) fails with EFBIG, as one on a full disk fails, rather than
  // ending the process. Node starts with SIGXFSZ ignored, but a preloaded module may not leave it so: `signal-exit`
  // (which tap preloads into every child through NODE_OPTIONS) listens for it and, finding no other listener,
  // raises it again with the default action, which ends the process. With a listener of our own it never does.
  process.on('SIGXFSZ', () => {});
  onEnvironmentPanic((err) => fatalExit('the embedded store failed and must be opened again: exiting for the supervisor to restart the process', err));
  /**
   * A step of the start, whose `StoppedWhileStarting` (the process was told to stop meanwhile) ends the start:
   * nothing was served, so what is open is closed as the drain's last steps do, and the process exits.
   */
  const orStop = <T>(step: Promise<T>, phase: string): Promise<T> =>
    step.catch(async (err: unknown) => {
      if (!(err instanceof StoppedWhileStarting)) throw err;
      return stopStarting(err, phase);
    });
  const stopStarting = (err: StoppedWhileStarting, phase: string): Promise<never> => {
    logger.info({ signal: err.received }, `stopped while ${phase}`);
    return closeAndExit(createStopSteps(logger));
  };
  /** Goes on with the start unless the process was told to stop meanwhile (between steps that `orStop` does not cover). */
  const goOn = async (): Promise<void> => {
    const reason: unknown = startSignals.signal.reason;
    if (reason instanceof StoppedWhileStarting) await stopStarting(reason, 'starting');
  };
  await goOn();
  // Every role but a worker without METRICS_PORT listens on HOST: one it cannot listen on is named before anything opens.
  if (roles.has('edge') || roles.has('socket') || roles.has('media') || config.metricsPort !== undefined) {
    await orStop(startSignals.until(checkHost(config.host)), 'checking HOST');
  }
  // The embedded store's directory (MongoDB's deployments keep in it at most the operator token's hash and the
  // webhook key file, when those are not set, and need not have one).
  if (!config.mongodbUrl) await checkDataDir(config.dataDir);
  // The wait for MongoDB (an unreachable server is waited for until the driver gives up) ends at a signal.
  const store = (opened.store = await orStop(startSignals.until(openStore({ dataDir: config.dataDir, mongodbUrl: config.mongodbUrl })), 'opening the store'));
  // Processes that serve requests read keys, connectors, accounts, projects and settings through a cache;
  // workers read agents' real-time config pages through it on every turn.
  const servesRequests = roles.has('edge') || roles.has('socket');
  const cached = servesRequests || roles.has('worker');
  const services = createServices(store, cached ? config.tenancyCache : undefined, config.builder);
  services.blobs = opened.blobs = await orStop(startSignals.until(openBlobStore({ dataDir: config.dataDir, mongodbUrl: config.mongodbUrl })), 'opening the blob store');
  const tokenHash = await operatorTokenHash(config.dataDir, config.operatorToken, (line) => process.stdout.write(`${line}\n`));
  await goOn();
  if (config.operatorToken && config.operatorToken.length < WEAK_OPERATOR_TOKEN) {
    logger.warn(`OPERATOR_TOKEN is shorter than ${WEAK_OPERATOR_TOKEN} characters: whoever reaches the edge port could guess the admin API's token; use a long random one (or leave it unset to have one generated)`);
  }
  const sharing = store.otherProcesses();
  if (sharing.length > 0) {
    logger.warn(
      { pids: sharing, dataDir: config.dataDir },
      'other processes have this DATA_DIR open: with lmdb-js 3.5.6 a process that opens the embedded store while another commits can make that commit be lost; run several processes on MongoDB (MONGODB_URL), see docs/storage.md',
    );
  }
  if (!config.natsUrl && !roles.has('worker')) {
    logger.warn('no NATS_URL and no worker role in this process: actors are unreachable from it');
  }
  // A worker hosts the conversation actors, whose effects run project functions and the responder.
  const sandbox = roles.has('worker') ? (opened.sandbox = createFunctionSandbox({ timeoutMs: config.functionTimeoutMs, ...config.functions })) : null;
  if (sandbox) {
    // Prometheus: every function call by outcome (ok, or the error kind: error, timeout, ...).
    const invoke = sandbox.invoke.bind(sandbox);
    sandbox.invoke = async (request) => {
      const result = await invoke(request);
      sandboxCalls.inc({ outcome: result.ok ? 'ok' : result.error.kind });
      return result;
    };
  }
  if (sandbox) {
    // Said once at start: what the OS gives the sandbox processes here, and what it does not.
    const isolation = await orStop(startSignals.until(sandbox.start()), 'starting the function sandbox');
    if (isolation.missing.length > 0) logger.warn({ isolation: isolation.layer, missing: isolation.missing }, 'function sandbox runs without some OS isolation');
    else logger.info({ isolation: isolation.layer }, 'function sandbox isolated');
  }
  // Endpoints' signing secrets are sealed at rest: the edge seals them, a worker's deliveries open them.
  const webhookSecrets = roles.has('edge') || roles.has('worker') ? await SecretBox.open(config.dataDir, config.webhooks.secretsKey) : null;
  await goOn();
  // Session actors ask conversation actors and publish their events through the runtime started below.
  let runtimeStarted!: (r: Runtime) => void;
  const runtimeReady = new Promise<Runtime>((resolve) => (runtimeStarted = resolve));
  const extraKinds = sandbox
    ? [
        conversationKind({
          store,
          builder: services.builder,
          sandbox,
          responder: createResponder(config.llm),
          functionTimeoutMs: config.functionTimeoutMs,
          maxTranscriptBytes: config.conversationMaxTranscriptBytes,
          externalEvents: config.externalEvents,
          client: async () => (await runtimeReady).client,
        }),
        sessionKind({ store, builder: services.builder, client: async () => (await runtimeReady).client, transport: async () => (await runtimeReady).transport, conversationIdleMs: config.conversationIdleMs, turnWaitMs: config.turnWaitMs }),
        callKind({ store, transport: async () => (await runtimeReady).transport, ...config.outbound, warn: (msg, err) => logger.warn({ err }, msg) }),
        deliveryKind({
          store,
          secrets: webhookSecrets!,
          allowPrivate: config.webhooks.allowPrivateUrls,
          schedule: config.webhooks.retryScheduleMs,
          // Whether the attempt will be retried is the machine's call; the counter tells answers from failures.
          onAttempt: (r) => webhookAttempts.inc({ outcome: r.status !== null && r.status >= 200 && r.status < 300 ? 'delivered' : r.status !== null ? `http_${Math.floor(r.status / 100)}xx` : (r.error ?? 'error') }),
        }),
        alertRuleKind({ store, client: async () => (await runtimeReady).client, intervalMs: config.alerts.evalIntervalMs }),
      ]
    : [];
  // Over NATS the runtime waits for a server that is not reachable yet, until the signal ends the wait. Not
  // through `until`: a runtime that started after all would be left running (its projection thread reading
  // the store being closed); one that starts is drained instead, once the process serves.
  const runtime = await orStop(
    startRuntime({ kinds: builtinKinds(extraKinds), natsUrl: config.natsUrl, worker: roles.has('worker'), signal: startSignals.signal, ...runtimeOptions(config, log, store) }),
    'waiting for NATS',
  );
  runtimeStarted(runtime);
  // A worker deletes the external-event waits nothing settled, long after their deadline, and the events past
  // their retention (every worker may: a delete names the deadline or receipt time it read).
  const waitSweeps = sandbox ? startExternalWaitSweeps(store, (msg, extra) => logger.warn(extra, msg), undefined, config.externalEvents.retentionMs) : null;
  // And the webhook delivery log past its retention, and the log of deleted endpoints.
  const deliverySweeps = sandbox ? startDeliveryLogSweeps(store, (msg, extra) => logger.warn(extra, msg), config.webhooks.deliveryRetentionMs) : null;
  const host = runtime.host;
  if (host) {
    countLiveActors(() => host.liveActorsByKind());
    countExpiredEvents(() => host.expiredByKind);
  }
  const metricsServer = config.metricsPort !== undefined ? await serveMetrics(config.host, config.metricsPort) : null;
  // Over NATS, an operator's write (and a real-time config change) must reach the caches of the other
  // processes too, workers included (platform/invalidation.ts); embedded, those of the edge thread and this one.
  const bus = cached && (config.natsUrl || edgeThreaded)
    ? await startInvalidationBus(busOptions(config, log, runtime, store, services.tenancy))
    : null;
  let serving = false;
  const isServing = () => serving;

  const metricsShared = edgeThreaded ? shareMetrics(runtime.transport, 'main', 'edge') : null;
  const edgeThread: EdgeThread | null = edgeThreaded
    ? await startEdgeThread({
        runtime,
        operatorTokenHash: tokenHash,
        onFailure: (err) => fatalExit('the edge thread failed', err),
      })
    : null;
  const edge = roles.has('edge') && !edgeThread ? await serveEdge({ config, services, runtime, operatorTokenHash: tokenHash, log, webhookSecrets: webhookSecrets!, isServing }) : null;
  const edgePort = edgeThread?.port ?? (edge ? (edge.server.address() as { port: number }).port : null);
  const socket: SocketGateway | null = roles.has('socket')
    ? await startSocketGateway({ host: config.host, port: config.socketPort, logger, isServing, services, runtime, messaging: config.messaging, region: config.region })
    : null;
  // The media gateway: SIP and RTP on HOST; inbound calls to bound numbers, and the call actor's dial requests.
  const media: MediaGateway | null = roles.has('media')
    ? await startMediaGateway({
        host: config.host,
        settings: config.media,
        dataDir: config.dataDir,
        builder: services.builder,
        telephony: services.builder.telephony,
        runtime,
        ...speechFromEnv(),
        conversationIdleMs: config.conversationIdleMs,
        // A call outlasts a worker failover (a lease moves after about LEASE_TTL_MS); its start and turns are waited
        // for as long as the agent may take to answer, as the Chat API's and a messaging session's are.
        askTimeoutMs: Math.max(config.askTimeoutMs, 4 * config.leaseTtlMs),
        turnWaitMs: Math.max(config.turnWaitMs, 4 * config.leaseTtlMs),
        log: (level, msg, extra) => logger[level](extra ?? {}, msg),
        recordings: new Recordings(services.blobs, {
          projectRetentionDays: async (projectId) => (await services.settings.get(projectId)).recording_retention_days,
          log: (level, msg, extra) => logger[level](extra ?? {}, msg),
          journal: services.store.journal,
          ...config.recordings,
        }),
      })
    : null;
  media?.o.recordings?.startSweeping();
  const dialing = media ? answerDialRequests(media, runtime) : null;
  if (socket) countConnections(() => ({ sessions: socket.sessions, sockets: socket.connections }));
  // Every role has started: `/healthz` answers 200 on each port from here (503 before, the edge thread's too).
  serving = true;
  edgeThread?.serve();

  const where = [
    edgePort !== null ? `edge http://${urlHost(config.host)}:${edgePort}` : null,
    socket ? `socket http://${urlHost(config.host)}:${socket.port}` : null,
    runtime.workerId ? `worker ${runtime.workerId}` : null,
    metricsServer ? `metrics http://${urlHost(config.host)}:${(metricsServer.address() as { port: number }).port}/metrics` : null,
    media ? `media sip:${urlHost(config.host)}:${media.ua.o.port} (udp, tcp)${media.ua.o.tlsPort ? `, sips ${media.ua.o.tlsPort} (tls)` : ''}` : null,
  ].filter(Boolean);
  process.stdout.write(`Switchboard ${config.region} serving: ${where.join(', ')} (store: ${store.backend}, data: ${config.dataDir}, transport: ${runtime.transport.kind})\n`);
  if (edgePort !== null) process.stdout.write(`OpenAPI: http://${urlHost(config.host)}:${edgePort}/openapi.json, browsable at /docs\n`);

  let draining = false;
  const drain = async (signal: string) => {
    if (draining) return;
    draining = true;
    serving = false;
    logger.info({ signal }, 'draining');
    // Each step runs whatever failed before it: with NATS gone, releasing the leases fails, and the store must
    // still be closed. Everything acknowledged is durable already (each commit is flushed before it answers).
    const steps = createStopSteps(logger);
    const { step } = steps;
    await step('socket gateway', () => socket?.close());
    await step('outbound dialling', () => dialing?.unsubscribe());
    await step('media gateway', () => media?.close());
    await step('recordings', () => media?.o.recordings?.close());
    await step('edge', () => edge?.close());
    await step('edge thread', () => edgeThread?.drain());
    await step('metrics', () => {
      metricsShared?.unsubscribe();
      metricsServer?.close();
    });
    await step('invalidation bus', () => bus?.stop());
    await step('runtime', () => runtime.stop());
    await step('external wait sweeps', () => waitSweeps?.stop());
    await step('delivery log sweeps', () => deliverySweeps?.stop());
    await closeAndExit(steps, () => logger.info('drained'));
  };
  process.on('SIGTERM', () => void drain('SIGTERM'));
  process.on('SIGINT', () => void drain('SIGINT'));
  // Told to stop once the runtime had started but before this process served: drain now.
  const early = startSignals.stop();
  if (early) void drain(early);
}
