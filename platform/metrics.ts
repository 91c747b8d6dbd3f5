import { createServer, type Server } from 'node:http';
import client from 'prom-client';
import { decode, encode, type Subscription, type Transport } from '../actors/mod.js';

/**
 * The process's Prometheus metrics (`prom-client`), served at `GET /metrics` on the edge port, and on
 * `METRICS_PORT` by processes without one (a worker alone). Labels are families, statuses, kinds and outcomes:
 * never a conversation, session or account id, so the series stay few.
 */
export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'switchboard_' });

/** HTTP answers of the edge by interface family and status. */
export const httpResponses = new client.Counter({
  name: 'switchboard_http_responses_total',
  help: 'HTTP answers of the edge, by interface family and status',
  labelNames: ['family', 'status'] as const,
  registers: [registry],
});

/** Chat turns as the edge answered them (request to answer), seconds. */
export const turnLatency = new client.Histogram({
  name: 'switchboard_turn_latency_seconds',
  help: 'Turn latency as answered by the edge (Chat API respond), seconds',
  labelNames: ['channel'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});

/** Webhook delivery attempts by outcome (`delivered`, `http_4xx`, `http_5xx`, or the error kind such as `timeout`): the delivery effect's `onAttempt`. */
export const webhookAttempts = new client.Counter({
  name: 'switchboard_webhook_attempts_total',
  help: 'Webhook delivery attempts, by outcome',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

/** Function sandbox calls by outcome (`ok`, `error`, `timeout`). */
export const sandboxCalls = new client.Counter({
  name: 'switchboard_sandbox_calls_total',
  help: 'Project function calls in the sandbox, by outcome',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

/**
 * Messaging sockets closed, by close code (`1000` to `1015`, else `other`) and whether it came within a second of
 * the socket's open (`early`). A 1006 (closed without a close frame) that is early can be the upgrade that
 * uWebSockets.js closes after an asynchronous upgrade (docs/messaging.md, Known issue).
 */
export const socketCloses = new client.Counter({
  name: 'switchboard_messaging_socket_closes_total',
  help: 'Messaging sockets closed, by close code and whether within a second of their open',
  labelNames: ['code', 'early'] as const,
  registers: [registry],
});

/** Per-kind counts a worker's host keeps, summed over every source at each scrape. */
type KindCounts = () => Record<string, number>;

/**
 * A series by actor kind read from its sources at each scrape (`Gauge` for a level, `Counter` for a count that
 * only grows); returns how to add a source.
 */
function byKind(Series: typeof client.Gauge | typeof client.Counter, name: string, help: string): (source: KindCounts) => void {
  const sources: KindCounts[] = [];
  new (Series as typeof client.Gauge)({
    name,
    help,
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const source of sources) for (const [kind, n] of Object.entries(source())) this.inc({ kind }, n);
    },
  });
  return (source) => {
    sources.push(source);
  };
}

/** Adds a source of live actors per kind (a worker's host). */
export const countLiveActors = byKind(client.Gauge, 'switchboard_live_actors', 'Live (activated) actors of this process, by kind');

/** Adds a source of expired events per kind since start (a worker's host). */
export const countExpiredEvents = byKind(
  client.Counter,
  'switchboard_actor_events_expired_total',
  'Events not applied because their askers had given up (a mailbox backlog older than their deadlines), by actor kind',
);

const connectionSources: Array<() => { sessions: number; sockets: number }> = [];
new client.Gauge({
  name: 'switchboard_messaging_connections',
  help: 'Messaging sessions with a socket and open sockets of this process',
  labelNames: ['what'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const source of connectionSources) {
      const c = source();
      this.inc({ what: 'sessions' }, c.sessions);
      this.inc({ what: 'sockets' }, c.sockets);
    }
  },
});
/** Adds a source of messaging sessions and sockets (a socket gateway). */
export function countConnections(source: () => { sessions: number; sockets: number }): void {
  connectionSources.push(source);
}

type MetricsJson = Awaited<ReturnType<typeof registry.getMetricsAsJSON>>;
/** The other threads of this process whose metrics a scrape adds (`shareMetrics`). */
const peers: Array<() => Promise<MetricsJson>> = [];
/** How long a scrape waits for another thread's metrics before it answers without them. */
const PEER_TIMEOUT_MS = 2000;

/**
 * This thread's own metrics: the ones the platform counts. The default metrics of the process (CPU, memory,
 * file descriptors) are the same from every thread, so only the thread that serves a scrape adds them.
 */
async function ownMetrics(): Promise<MetricsJson> {
  return (await registry.getMetricsAsJSON()).filter((m) => !DEFAULT_METRIC.test(m.name));
}
const DEFAULT_METRIC = /^switchboard_(process_|nodejs_)/;

/**
 * Makes this thread's metrics part of every scrape of another thread of the process, and that thread's part of
 * this one's: the embedded default's edge thread and main thread, each answering on `sb.metrics.<own>` and asking
 * `sb.metrics.<peer>` over the transport between them. Counters and histograms of both are summed.
 */
export function shareMetrics(transport: Transport, own: string, peer: string): Subscription {
  peers.push(async () => decode<MetricsJson>(await transport.request(`sb.metrics.${peer}`, new Uint8Array(0), PEER_TIMEOUT_MS)));
  return transport.subscribe(`sb.metrics.${own}`, (_data, respond) => {
    ownMetrics().then((m) => respond?.(encode(m)), () => undefined);
  });
}

/** The exposition text and its content type (with the other threads' metrics: `shareMetrics`). */
export async function scrape(): Promise<{ contentType: string; body: string }> {
  if (peers.length === 0) return { contentType: registry.contentType, body: await registry.metrics() };
  // A thread that does not answer (stopping) leaves its counters out of this scrape rather than failing it.
  const theirs = await Promise.all(peers.map((p) => p().catch(() => [] as MetricsJson)));
  const merged = client.AggregatorRegistry.aggregate([await registry.getMetricsAsJSON(), ...theirs] as Parameters<typeof client.AggregatorRegistry.aggregate>[0]);
  return { contentType: registry.contentType, body: await merged.metrics() };
}

/** Serves `GET /metrics` on its own port (processes without an edge: `METRICS_PORT`). */
export async function serveMetrics(host: string, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    scrape().then(
      (m) => res.writeHead(200, { 'content-type': m.contentType }).end(m.body),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return server;
}
