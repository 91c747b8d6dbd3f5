import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { EdgeConfig } from '../../platform/config.js';
import type { Services } from '../../platform/services.js';
import { EDGE } from '../../platform/errors.js';
import { otherRegion, type Region } from '../../platform/region.js';
import { RateLimiter } from '../../platform/rate-limit.js';
import type { Runtime } from '../../actors/mod.js';
import { adminPlugin } from './admin.js';
import { asyncapiDocument } from './asyncapi.js';
import { projectionsPlugin, runtimePlugin } from './runtime.js';
import { agentsPlugin } from './agents/plugin.js';
import { chatPlugin } from './chat.js';
import { outboundPlugin } from './outbound.js';
import { conversationsPlugin } from './conversations/plugin.js';
import { BODY_LIMIT, clientErrorResponse, expectationFailed, frameworkProblem, MAX_PARAM_LENGTH, requireHost, routeNotFound, sendProblem, shapeForPath, toProblem } from './errors.js';
import { healthPlugin } from './health.js';
import { bridgeEndedPlugin, externalEventsPlugin } from './external-events.js';
import { jsonBodyParser, notJsonBodyParser } from './json-body.js';
import { hasBody, refuseCodings } from './body-headers.js';
import { openapiTransform, SECURITY_SCHEMES } from './openapi.js';
import { inspectorPlugin } from './inspector/plugin.js';
import { inspectorPagePlugin } from './inspector/page.js';
import { inspectorFeed } from './inspector/feed.js';
import { context, contextFromHeaders, markTraced, tracingStarted, SpanKind, SpanStatusCode, trace, tracer, type Context, type Span } from '../../platform/telemetry.js';
import { webhookEndpointsPlugin } from './webhook-endpoints/plugin.js';
import type { SecretBox } from '../../actors/delivery/mod.js';
import { alertsPlugin } from './alerts/plugin.js';
import { countServerErrors } from './alerts/api-errors.js';
import { lazyRequestLogger } from './request-logger.js';
import { scrape } from '../../platform/metrics.js';
import { CONVERSATION_MAX_ATTRIBUTES_BYTES } from '../../machines/conversation.js';

/** The routes a request addressed to another region's host still reaches: the probes'. */
const EXEMPT_FROM_REGION = new Set(['/healthz', '/metrics']);

/** The span of each request (and its context) while tracing is on. */
const requestSpans = new WeakMap<object, { span: Span; ctx: Context }>();

/**
 * One `edge` server span per HTTP request (method, route, status), continuing an incoming `traceparent`.
 * The request's handling runs in its context (re-entered after the body is read), so asks to actors are its
 * children; the request's log lines carry `trace_id` and `span_id`. Nothing is added while tracing is off.
 */
function traceRequests(app: FastifyInstance): void {
  if (!tracingStarted()) return;
  app.addHook('onRequest', (request, reply, done) => {
    const route = request.routeOptions.url;
    const span = tracer.startSpan(`${request.method} ${route ?? 'unmatched'}`, {
      kind: SpanKind.SERVER,
      attributes: { 'http.request.method': request.method, 'url.path': request.url.split('?')[0], ...(route ? { 'http.route': route } : {}) },
    }, contextFromHeaders(request.headers));
    if (!span.isRecording()) return done();
    const ctx = trace.setSpan(context.active(), span);
    requestSpans.set(request, { span, ctx });
    const { traceId, spanId } = span.spanContext();
    request.log = markTraced(request.log.child({ trace_id: traceId, span_id: spanId }));
    reply.log = request.log;
    context.with(ctx, done);
  });
  // Reading the body leaves the request's context: the hooks after it and the handler run in it again.
  app.addHook('preValidation', (request, _reply, done) => {
    const traced = requestSpans.get(request);
    if (traced) context.with(traced.ctx, done);
    else done();
  });
  const end = (request: object, status: number | null) => {
    const traced = requestSpans.get(request);
    if (!traced) return;
    requestSpans.delete(request);
    if (status !== null) traced.span.setAttribute('http.response.status_code', status);
    if (status === null || status >= 500) traced.span.setStatus({ code: SpanStatusCode.ERROR, message: status === null ? 'aborted' : String(status) });
    traced.span.end();
  };
  app.addHook('onResponse', async (request, reply) => end(request, reply.statusCode));
  app.addHook('onRequestAbort', async (request) => end(request, null));
}

export interface EdgeOptions {
  services: Services;
  runtime: Runtime;
  /** An idle conversation ends by itself this long after its last turn. */
  conversationIdleMs: number;
  /** The most bytes of JSON a conversation's integration attributes hold (`CONVERSATION_MAX_ATTRIBUTES_BYTES`); unset: the default. */
  conversationMaxAttributesBytes?: number;
  /** How long the Chat API waits for a turn (`Config.turnWaitMs`); unset: the runtime's ask timeout. */
  turnWaitMs?: number;
  operatorTokenHash: string;
  logger: Logger;
  /**
   * `info` (default): Fastify's own request and response lines; `debug`: one line per response at debug,
   * server errors at warn (the quieter terminal default, platform/logger.ts).
   */
  requestLevel?: 'info' | 'debug';
  /** Called by `/healthz`: false while the process is not (or no longer) serving. */
  isServing: () => boolean;
  /** Chat API rate limits and the HTTP server's timeouts. */
  limits: EdgeConfig;
  /** The External Events webhook's body limit (bytes). */
  externalEvents?: { maxBytes: number };
  /** Told of every route as it is registered (the OpenAPI coverage test lists them with it). */
  onRoute?: (route: { method: string | string[]; url: string }) => void;
  /** Webhook endpoints (`/v1/webhook-endpoints`): the signing secrets' box and whether private URLs are allowed. */
  webhooks?: { secrets: SecretBox; allowPrivateUrls: boolean };
  /** How often the edge appends its 5xx counts to the journal (the `api_errors` metric), ms. */
  apiErrorsFlushMs?: number;
  /** The region this deployment serves (`REGION`): a request whose Host names another is refused (421). */
  region?: Region;
}

/**
 * Node looks for requests past their header or request deadline on this interval (its default is far longer
 * than a short deadline), so a slow client is dropped within about a quarter of its deadline after it.
 */
const checkingInterval = (headersTimeoutMs: number) => Math.max(50, Math.min(30_000, Math.floor(headersTimeoutMs / 4)));

/**
 * Fastify hands a request without a body to validation as null. The JSON parser refuses a literal `null`
 * body, so a null here always means "no body", which optional and defaulted body schemas accept.
 */
const bodyAwareValidatorCompiler: typeof validatorCompiler = (route) => {
  const validate = validatorCompiler(route);
  return route.httpPart === 'body' ? (data: unknown) => validate(data === null ? undefined : data) : validate;
};

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Builds the Fastify edge: every REST family of the contract except messaging, the admin API, `/healthz`,
 * and the OpenAPI document generated from the zod schemas (`/openapi.json`, browsable at `/docs`).
 */
export async function buildEdge(opts: EdgeOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: opts.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: opts.requestLevel === 'debug' }),
    childLoggerFactory: lazyRequestLogger,
    requestIdHeader: 'x-request-id',
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    bodyLimit: BODY_LIMIT,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: (err, request, reply) => sendProblem(reply, shapeForPath(request.url), frameworkProblem(err)),
    clientErrorHandler: (err: NodeJS.ErrnoException, socket: Duplex) => {
      // A reset connection has nobody to answer.
      if (err.code === 'ECONNRESET' || socket.destroyed) return;
      if (socket.writable) socket.write(clientErrorResponse(err));
      socket.destroy(err);
    },
    // Draining (operator.md): a request that arrives on a connection still busy when the drain began (pipelined
    // behind one in flight) is served, with `Connection: close`, as part of finishing what is in flight; Fastify's
    // default answers it 503 in a shape of its own, no family's. Idle connections are closed at once.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // Slow clients (slow-loris: headers or bodies dribbled a byte at a time) must not hold connections, and
    // with them file descriptors the socket gateway in the same process needs, for longer than these.
    connectionTimeout: opts.limits.connectionTimeoutMs,
    keepAliveTimeout: opts.limits.keepAliveTimeoutMs,
    requestTimeout: opts.limits.requestTimeoutMs,
    http: {
      // Checked by `requireHost`, which answers with a body as Node's check does not.
      requireHostHeader: false,
      headersTimeout: opts.limits.headersTimeoutMs,
      requestTimeout: opts.limits.requestTimeoutMs,
      connectionsCheckingInterval: checkingInterval(opts.limits.headersTimeoutMs),
    },
  }) as unknown as FastifyInstance;
  // Past this many connections Node closes new ones at once: a flood of connections to the edge cannot use up
  // the process's descriptors.
  app.server.maxConnections = opts.limits.maxConnections;
  // Node's answers before routing, given the body of its parser's refusals (`clientErrorResponse`).
  app.server.on('checkExpectation', expectationFailed);
  app.addHook('onRequest', requireHost);
  if (opts.onRoute) {
    const tell = opts.onRoute;
    app.addHook('onRoute', (route) => tell({ method: route.method, url: route.url }));
  }
  app.setValidatorCompiler(bodyAwareValidatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.decorateRequest('apiKey', null);
  app.decorateRequest('tenant', null);
  // JSON only at the root (any other body refused, an empty one taken as none); a family that takes other
  // bodies (external events) adds its parsers in its own context.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, jsonBodyParser);
  app.addContentTypeParser('*', notJsonBodyParser);
  app.addHook('preParsing', refuseCodings);
  traceRequests(app);
  if (opts.region) {
    const served = opts.region;
    // Contract, Conventions: the region is part of the host name; a request addressed to another region's host
    // reached the wrong deployment. Health and metrics answer whatever the name (probes use addresses): judged by
    // the route matched, not a prefix of the URL, so `/healthzX` or `/metrics/anything` is refused like any path.
    app.addHook('onRequest', async (request, reply) => {
      const named = otherRegion(request.headers.host, served);
      if (named === null || EXEMPT_FROM_REGION.has(request.routeOptions.url ?? '')) return;
      sendProblem(reply, shapeForPath(request.url), toProblem(EDGE.REGION_OTHER(named, served), request));
      return reply;
    });
  }
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
    // Answered before the request's body has all arrived (a key refused in `onRequest`, a body still being
    // dribbled): the connection closes after this answer. Node would otherwise go on waiting for the rest of the
    // body and, at the request deadline, write a second, unasked-for 408 on the same connection.
    if (!request.raw.complete && hasBody(request.raw.headers)) reply.header('connection', 'close');
  });
  if (opts.requestLevel === 'debug') {
    app.addHook('onResponse', async (request, reply) => {
      const line = { method: request.method, url: request.url, statusCode: reply.statusCode, responseTime: Math.round(reply.elapsedTime) };
      if (reply.statusCode >= 500) request.log.warn(line, 'request failed');
      else request.log.debug(line, 'request completed');
    });
  }
  countServerErrors(app, opts.services.store.journal, opts.apiErrorsFlushMs);
  app.setErrorHandler((err, request, reply) => sendProblem(reply, shapeForPath(request.url), toProblem(err, request)));
  app.setNotFoundHandler((request, reply) => sendProblem(reply, shapeForPath(request.url), routeNotFound(request)));

  await app.register(fastifySwagger, {
    openapi: {
      info: {
        title: 'Switchboard',
        description:
          'Self-hosted conversational agent platform: the operator admin API, the Agents, Conversations, Concurrent Calls, Chat and External Events APIs and bridge-ended. ' +
          'The Messaging API (socket port) is described by the AsyncAPI document at `GET /asyncapi.json`.',
        version: '0.1.0',
      },
      components: { securitySchemes: SECURITY_SCHEMES },
    },
    transform: openapiTransform,
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  // The Messaging API (socket port) as AsyncAPI 3.0, served here beside the OpenAPI document.
  const asyncapi = JSON.stringify(asyncapiDocument());
  app.get('/asyncapi.json', { schema: { hide: true } }, async (_req, reply) => reply.type('application/json').send(asyncapi));

  await app.register(healthPlugin, { isServing: opts.isServing, degraded: () => opts.runtime.health.degraded() });
  await app.register(adminPlugin, { prefix: '/admin/v1', services: opts.services, operatorTokenHash: opts.operatorTokenHash });
  await app.register(runtimePlugin, { prefix: '/admin/v1/runtime', services: opts.services, runtime: opts.runtime, operatorTokenHash: opts.operatorTokenHash });
  await app.register(projectionsPlugin, { prefix: '/admin/v1/runtime/projections', services: opts.services, runtime: opts.runtime, operatorTokenHash: opts.operatorTokenHash });
  await app.register(agentsPlugin, { prefix: '/v1', services: opts.services });
  await app.register(chatPlugin, {
    services: opts.services,
    runtime: opts.runtime,
    idleTimeoutMs: opts.conversationIdleMs,
    maxAttributesBytes: opts.conversationMaxAttributesBytes ?? CONVERSATION_MAX_ATTRIBUTES_BYTES,
    // Within the connection's idle timeout: past it the socket is dropped, and the client gets no answer at all.
    turnWaitMs: opts.turnWaitMs === undefined ? undefined : Math.max(100, Math.min(opts.turnWaitMs, opts.limits.connectionTimeoutMs - 1000)),
    perKey: opts.limits.chatPerKey,
    perProject: opts.limits.chatPerProject,
  });
  // One bucket per project for the family's two routes, taken once the key is verified.
  const externalEventsLimiter = new RateLimiter(opts.limits.externalEventsPerProject.rate, opts.limits.externalEventsPerProject.burst);
  await app.register(externalEventsPlugin, { services: opts.services, runtime: opts.runtime, maxBytes: opts.externalEvents?.maxBytes ?? 256 * 1024, limiter: externalEventsLimiter });
  await app.register(bridgeEndedPlugin, { services: opts.services, runtime: opts.runtime, limiter: externalEventsLimiter });
  await app.register(outboundPlugin, { services: opts.services, runtime: opts.runtime });
  // Cursors are MAC'd with a deployment secret every edge shares: the operator token's hash.
  await app.register(conversationsPlugin, {
    services: opts.services,
    cursorSecret: `conversations-cursor:${opts.operatorTokenHash}`,
    slotCacheBytes: (opts.limits.slotCacheMb ?? 0) * 1024 * 1024,
  });
  // The inspector (docs/inspector.md): its admin API, its page, its @statelyai/inspect WebSocket feed.
  await app.register(inspectorPlugin, { prefix: '/admin/v1/inspector', services: opts.services, runtime: opts.runtime, operatorTokenHash: opts.operatorTokenHash });
  await app.register(inspectorPagePlugin);
  inspectorFeed(app, { services: opts.services, operatorTokenHash: opts.operatorTokenHash });
  if (opts.webhooks) {
    await app.register(webhookEndpointsPlugin, { prefix: '/v1/webhook-endpoints', keys: opts.services.keys, store: opts.services.store, runtime: opts.runtime, ...opts.webhooks });
  }
  await app.register(alertsPlugin, { prefix: '/v1', services: opts.services, runtime: opts.runtime });
  // Prometheus exposition (platform/metrics.ts): no credentials, as scrapers expect; bind the edge accordingly.
  app.get('/metrics', {
    schema: { tags: ['operations'], summary: 'Prometheus exposition of this process (and its other threads), without credentials', security: [] },
    config: { openapiResponses: { 200: z.string().describe('Prometheus text exposition format 0.0.4') }, openapiResponseMedia: 'text/plain; version=0.0.4' },
  }, async (_req, reply) => {
    const m = await scrape();
    return reply.type(m.contentType).send(m.body);
  });
  return app;
}
