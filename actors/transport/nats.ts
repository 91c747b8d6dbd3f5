import {
  ClosedConnectionError,
  connect,
  DrainingConnectionError,
  headers as natsHeaders,
  RequestError,
  TimeoutError,
  type NatsConnection,
} from '@nats-io/transport-node';
import { TransportError, type Handler, type Headers, type SubscribeOptions, type Subscription, type Transport } from './types.js';

/** Options of `connectNatsTransport`. */
export interface NatsTransportOptions {
  /** Connection name shown by the server's monitoring. */
  name?: string;
}

/** The NATS transport, with its connection for the placement leases and KV buckets that share it. */
export type NatsTransport = Transport & { readonly connection: NatsConnection };

/** Turns nats.js errors into `TransportError`s where the transport contract names them. */
function mapError(err: unknown, nc: NatsConnection, subject: string, timeoutMs?: number): unknown {
  if (err instanceof TimeoutError) {
    return new TransportError('TIMEOUT', `request to '${subject}' timed out after ${timeoutMs} ms`);
  }
  if (err instanceof RequestError && err.isNoResponders()) {
    return new TransportError('NO_RESPONDERS', `no responders for '${subject}'`);
  }
  // Requests cut short by close fail with a plain RequestError("connection closed"): judge by the state.
  if (
    err instanceof ClosedConnectionError ||
    err instanceof DrainingConnectionError ||
    (err instanceof RequestError && (nc.isClosed() || nc.isDraining()))
  ) {
    return new TransportError('CLOSED', 'transport closed');
  }
  return err;
}

function toNats(h: Headers) {
  const out = natsHeaders();
  for (const [k, v] of Object.entries(h)) out.set(k, v);
  return out;
}

function fromNats(h: Iterable<[string, string[]]>): Headers {
  const out: Headers = {};
  for (const [k, v] of h) if (v.length) out[k.toLowerCase()] = v[0];
  return out;
}

/**
 * Connects to NATS at `url` (reconnecting without limit) and returns a transport over that connection.
 * Subscriptions use callbacks rather than async iterators: one less promise hop per message.
 * `close()` drains: subscriptions receive what was already sent, then the connection closes.
 */
export async function connectNatsTransport(url: string, options: NatsTransportOptions = {}): Promise<NatsTransport> {
  const nc = await connect({
    servers: url,
    name: options.name,
    maxReconnectAttempts: -1,
    // Async traces allocate an Error per request to improve stacks; not worth it on the hot path.
    noAsyncTraces: true,
  });

  return {
    kind: 'nats',
    connection: nc,

    async request(subject, data, timeoutMs, headers) {
      try {
        const msg = await nc.request(subject, data, headers ? { timeout: timeoutMs, headers: toNats(headers) } : { timeout: timeoutMs });
        return msg.data;
      } catch (err) {
        throw mapError(err, nc, subject, timeoutMs);
      }
    },

    publish(subject, data) {
      try {
        nc.publish(subject, data);
      } catch (err) {
        throw mapError(err, nc, subject);
      }
    },

    subscribe(subject: string, handler: Handler, options: SubscribeOptions = {}): Subscription {
      try {
        const sub = nc.subscribe(subject, {
          queue: options.queue,
          callback: (err, msg) => {
            // Errors here end the subscription (permissions, server-side close): nothing to deliver.
            if (err) return;
            const respond = msg.reply
              ? (answer: Uint8Array) => {
                  try {
                    msg.respond(answer);
                  } catch {
                    // The connection closed meanwhile: the requester sees a timeout or CLOSED.
                  }
                }
              : null;
            try {
              handler(msg.data, respond, msg.subject, msg.headers ? fromNats(msg.headers) : undefined);
            } catch (thrown) {
              // A throw inside nats.js's reader silently stops the connection from reading; report it
              // as an uncaught exception instead, as the in-process transport does.
              queueMicrotask(() => {
                throw thrown;
              });
            }
          },
        });
        return { unsubscribe: () => sub.unsubscribe() };
      } catch (err) {
        throw mapError(err, nc, subject);
      }
    },

    async flush() {
      try {
        await nc.flush();
      } catch (err) {
        throw mapError(err, nc, '');
      }
    },

    async close() {
      if (nc.isClosed()) return;
      if (nc.isDraining()) {
        await nc.closed();
        return;
      }
      await nc.drain();
    },
  };
}
