import type { HttpResponse, TemplatedApp } from '@trufflesuite/uws-js-unofficial';
import { createServer } from 'node:net';
import type { Logger } from 'pino';
import type { Runtime } from '../../actors/mod.js';
import type { MessagingConfig } from '../../platform/config.js';
import type { Region } from '../../platform/region.js';
import type { Services } from '../../platform/services.js';
import { mountAccessToken } from './access-token.js';
import { messagingContext } from './context.js';
import { mountDesk } from './desk.js';
import { errorBody, HTTP_ERRORS } from './errors.js';
import { framingChecked } from './framing.js';
import { preflight, withoutBody } from './http.js';
import { mountSessions } from './sessions.js';
import { AccessTokens } from './tokens.js';
import { loadNativeUws, type Uws } from './uws.js';
import { GatewayDirectory } from './gateways.js';
import { mountSocket } from './ws.js';
import { mountWeb } from './web.js';

export interface SocketGateway {
  port: number;
  /** Sockets open now. */
  readonly connections: number;
  /** Sessions with a socket open now. */
  readonly sessions: number;
  /** Stops listening and closes every socket (deregistering them from their sessions). */
  close(): Promise<void>;
}

export interface SocketGatewayOptions {
  host: string;
  port: number;
  logger: Logger;
  isServing: () => boolean;
  services: Services;
  runtime: Runtime;
  messaging: MessagingConfig;
  /** The region this deployment serves (`REGION`): requests whose Host names another are refused (421). */
  region?: Region;
}

/**
 * The uWebSockets.js gateway on `SOCKET_PORT`: `GET /healthz` and the Messaging API (contract 4.7):
 * `POST /api/v1/access-token`, `POST /api/v1/sessions`, `GET /ws`, plus the live-agent desk under
 * `/api/v1/desk`, and the browser pages (`web.ts`: `/widget.js`, `/demo`, `/desk`). It holds no session state: sessions are actors (`session/<id>`), asked through the
 * runtime's client; their events reach this gateway's sockets through each session's topic.
 */
export async function startSocketGateway(opts: SocketGatewayOptions): Promise<SocketGateway> {
  const { uws, binary } = loadNativeUws();
  opts.logger.info({ binary }, 'uWebSockets.js native binary loaded (not the ws fallback)');
  const tokens = await AccessTokens.open(opts.services.store, { secret: opts.messaging.secret, ttlS: opts.messaging.tokenTtlS });
  const gatewayId = `g-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const gateways = new GatewayDirectory(opts.services.store, gatewayId, opts.messaging.connectionTtlMs);
  await gateways.start();
  const ctx = messagingContext({
    services: opts.services,
    runtime: opts.runtime,
    tokens,
    config: opts.messaging,
    logger: opts.logger,
    gatewayId,
    region: opts.region,
  });
  // Every route's handler, the upgrade's included, runs once the request's framing passed (`framing.ts`).
  const app = framingChecked(uws.App());
  const health = (head: boolean) => (res: HttpResponse) => {
    res.cork(() => {
      // As the edge's: 200 while serving, with the runtime's degradation causes when there are any.
      const degraded = opts.runtime.health.degraded();
      const body = degraded.length ? JSON.stringify({ status: 'ok', degraded }) : '{"status":"ok"}';
      if (opts.isServing()) endJson(res.writeStatus('200 OK'), body, head);
      else endJson(res.writeStatus('503 Service Unavailable'), '{"status":"draining"}', head);
    });
  };
  // Probes and load balancers may ask with HEAD, which uWebSockets.js routes apart from GET.
  app.get('/healthz', health(false));
  app.head('/healthz', health(true));
  app.options('/api/v1/*', (res) => preflight(res));
  mountAccessToken(app, ctx);
  mountSessions(app, ctx);
  mountDesk(app, ctx);
  mountWeb(app);
  const sockets = mountSocket(app, ctx, { gateways });
  app.any('/*', (res, req) => {
    const url = req.getUrl();
    // A HEAD is answered without its body: one sent after a HEAD's headers would be read by a keep-alive client
    // as the start of its next response.
    const head = req.getMethod().toLowerCase() === 'head';
    // The CORS header as on every Messaging API answer: a widget calling a wrong path reads the 404, not a CORS failure.
    res.cork(() => endJson(res.writeStatus('404 Not Found').writeHeader('access-control-allow-origin', '*'), errorBody(HTTP_ERRORS.notFound, `route ${url} not found`), head));
  });
  const socket = await listenExclusive(app, uws, opts.host, opts.port);
  return {
    port: uws.us_socket_local_port(socket as never),
    get connections() {
      return sockets.connections;
    },
    get sessions() {
      return sockets.sessions;
    },
    close: async () => {
      uws.us_listen_socket_close(socket as never);
      await sockets.close();
      await gateways.stop();
    },
  };
}

/** Ends a JSON answer; a HEAD's without its body, with the length the GET's would have. */
function endJson(res: HttpResponse, body: string, head: boolean): void {
  res.writeHeader('content-type', 'application/json');
  if (head) withoutBody(res, body);
  else res.end(body);
}

/**
 * Listens on `host:port` alone. uWebSockets.js binds with SO_REUSEPORT by default, so a second process given a
 * port another one's gateway holds would bind it too, and the kernel would split the connections between the
 * two deployments; with `LIBUS_LISTEN_EXCLUSIVE_PORT` (1: the package's types omit this overload, the native
 * binary takes it) the bind fails as any taken port does. uWebSockets.js says only that it failed: a bind of
 * node's own then says why, for a message that names the setting to change.
 */
async function listenExclusive(app: TemplatedApp, uws: Uws, host: string, port: number): Promise<unknown> {
  const exclusive = (uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT?: number }).LIBUS_LISTEN_EXCLUSIVE_PORT ?? 1;
  const listen = app.listen as unknown as (host: string, port: number, options: number, cb: (token: unknown) => void) => void;
  const token = await new Promise<unknown>((resolve) => listen.call(app, host, port, exclusive, resolve));
  if (token) return token;
  const code = await new Promise<string | undefined>((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
  if (code === 'EADDRINUSE') throw new Error(`SOCKET_PORT ${port} is in use on ${host}; set SOCKET_PORT to a free port, or 0 for any`);
  throw new Error(`the socket gateway could not listen on ${host}:${port}${code ? ` (${code})` : ''}; check SOCKET_PORT and HOST`);
}
