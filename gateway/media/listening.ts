import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';

type Listener = dgram.Socket | net.Server;

/**
 * Runs `start` (which makes and binds sockets synchronously, as `sip.create` does) and gives what it
 * returned with the sockets it made; each connection its TCP and TLS servers take is shown to `onConnection`
 * first (a guard on the stream, `stream-guard.ts`). The `sip` package binds its UDP socket and its TCP and TLS servers
 * without an 'error' listener, so a port taken between our probe and its bind would end the process with
 * an uncaught 'error'; seeing the sockets lets the caller listen for that and retry.
 */
export function capturingListeners<T>(start: () => T, onConnection: (stream: net.Socket) => void = () => {}): { value: T; listeners: Listener[] } {
  const listeners: Listener[] = [];
  // Each server's connection listener sees a connection after `onConnection` has: what `onConnection` attaches
  // to the stream comes before what the listener does.
  const first = (args: unknown[]) => args.map((a) => (typeof a === 'function' ? (s: net.Socket) => (onConnection(s), a(s)) : a));
  const createSocket = dgram.createSocket;
  const createServer = net.createServer;
  const createTlsServer = tls.createServer;
  // Patched only for the synchronous call below: nothing else runs in between.
  dgram.createSocket = ((...args: Parameters<typeof dgram.createSocket>) => keep(createSocket.apply(dgram, args))) as typeof dgram.createSocket;
  net.createServer = ((...args: unknown[]) => keep(createServer.apply(net, first(args) as Parameters<typeof net.createServer>))) as typeof net.createServer;
  tls.createServer = ((...args: unknown[]) => keep(createTlsServer.apply(tls, first(args) as Parameters<typeof tls.createServer>))) as typeof tls.createServer;
  function keep<L extends Listener>(l: L): L {
    listeners.push(l);
    return l;
  }
  try {
    return { value: start(), listeners };
  } finally {
    dgram.createSocket = createSocket;
    net.createServer = createServer;
    tls.createServer = createTlsServer;
  }
}

/**
 * Resolves once every listener is bound, rejects with the first bind error (EADDRINUSE, EACCES ...).
 * Either way each keeps an 'error' listener, `onError`, so a later socket error is reported, not thrown.
 */
export function allListening(listeners: Listener[], onError: (err: Error) => void): Promise<void> {
  for (const l of listeners) l.on('error', onError);
  return Promise.all(
    listeners.map(
      (l) =>
        new Promise<void>((resolve, reject) => {
          const failed = (err: Error) => reject(err);
          l.once('error', failed);
          l.once('listening', () => {
            l.off('error', failed);
            resolve();
          });
        }),
    ),
  ).then(() => undefined);
}
