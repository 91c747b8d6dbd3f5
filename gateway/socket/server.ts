import type { Logger } from 'pino';
import { loadNativeUws } from './uws.js';

export interface SocketGateway {
  port: number;
  close(): void;
}

/**
 * The uWebSockets.js gateway on `SOCKET_PORT`. It serves `GET /healthz` now; the Messaging API
 * (`/api/v1/access-token`, `/api/v1/sessions`, `/ws`) is mounted here by the messaging issue.
 */
export async function startSocketGateway(opts: { host: string; port: number; logger: Logger; isServing: () => boolean }): Promise<SocketGateway> {
  const { uws, binary } = loadNativeUws();
  opts.logger.info({ binary }, 'uWebSockets.js native binary loaded');
  const app = uws.App();
  app.get('/healthz', (res) => {
    res.cork(() => {
      if (opts.isServing()) res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end('{"status":"ok"}');
      else res.writeStatus('503 Service Unavailable').writeHeader('content-type', 'application/json').end('{"status":"draining"}');
    });
  });
  app.any('/*', (res, req) => {
    const url = req.getUrl();
    res.cork(() => {
      res.writeStatus('404 Not Found').writeHeader('content-type', 'application/json').end(JSON.stringify({ error_message: `route ${url} not found` }));
    });
  });
  const socket = await new Promise<unknown>((resolve, reject) => {
    app.listen(opts.host, opts.port, (token) => (token ? resolve(token) : reject(new Error(`socket gateway could not listen on ${opts.host}:${opts.port}`))));
  });
  return {
    port: uws.us_socket_local_port(socket as never),
    close: () => uws.us_listen_socket_close(socket as never),
  };
}
