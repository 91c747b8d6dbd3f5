import {
  ClosedConnectionError,
  createInbox,
  DrainingConnectionError,
  headers as natsHeaders,
  RequestError,
  type Msg,
  type NatsConnection,
} from '@nats-io/transport-node';
import { oncePerRun, type Arrived } from './arrival.js';
import { connectNats, type NatsWaitLog } from './nats-connect.js';
import { Outbox } from './nats-outbox.js';
import { TransportError, type Handler, type Headers, type SubscribeOptions, type Subscription, type Transport } from './types.js';

/** Options of `connectNatsTransport`. */
export interface NatsTransportOptions {
  /** Connection name shown by the server's monitoring. */
  name?: string;
  /** Runs before the messages of each socket read are handled (`Arrived`). */
  arrived?: Arrived;
  /** Stops the wait for a server that is not reachable yet (`connectNats`): the process is told to stop. */
  signal?: AbortSignal;
  /** Where that wait is told. */
  log?: NatsWaitLog;
}

/** The NATS transport, with its connection for the placement leases and KV buckets that share it. */
export type NatsTransport = Transport & { readonly connection: NatsConnection };

/** Turns nats.js's errors of a closed or draining connection into the transport's `CLOSED`. */
function mapError(err: unknown, nc: NatsConnection): unknown {
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

/** NATS subjects hold no whitespace (as nats.js checks before it publishes). */
const WHITESPACE = /[ \n\r\t]/;

/** A request waiting for its answer. */
interface Pending {
  subject: string;
  resolve: (data: Uint8Array) => void;
  reject: (err: unknown) => void;
  timer: NodeJS.Timeout;
}

/**
 * Connects to NATS at `url` (waiting for a server that is not reachable yet, then reconnecting without limit:
 * `connectNats`) and returns a transport over that connection.
 * Subscriptions use callbacks rather than async iterators: one less promise hop per message. What it sends
 * goes through an `Outbox`: one socket write per turn of the event loop. Requests are its own: one inbox
 * subscription (`_INBOX.<id>.*`) and a table of the pending ones, each with one timer; nats.js's `request`
 * also made a deferred, a timer promise and an `Error` (with its stack) for every request it completed.
 * `close()` drains: subscriptions receive what was already sent, then the connection closes.
 */
export async function connectNatsTransport(url: string, options: NatsTransportOptions = {}): Promise<NatsTransport> {
  const nc = await connectNats(url, { name: options.name, signal: options.signal, log: options.log });

  const arrived = options.arrived ? oncePerRun(options.arrived) : () => {};
  const pending = new Map<string, Pending>();
  const settle = (token: string): Pending | undefined => {
    const p = pending.get(token);
    if (!p) return undefined;
    pending.delete(token);
    clearTimeout(p.timer);
    return p;
  };
  const inbox = `${createInbox()}.`;
  let nextToken = 0;
  const outbox = new Outbox(nc, (reply, err) => {
    const p = settle(reply.slice(inbox.length));
    p?.reject(mapError(err, nc));
  });
  nc.subscribe(`${inbox}*`, {
    callback: (err, msg: Msg) => {
      if (err) return;
      arrived();
      const p = settle(msg.subject.slice(inbox.length));
      if (!p) return;
      // nats-server answers a request nobody subscribes to with an empty 503 status message.
      if (msg.data.length === 0 && msg.headers?.code === 503) p.reject(new TransportError('NO_RESPONDERS', `no responders for '${p.subject}'`));
      else p.resolve(msg.data);
    },
  });
  // However the connection ends, nothing is left waiting for an answer.
  const failPending = () => {
    for (const token of [...pending.keys()]) settle(token)!.reject(new TransportError('CLOSED', 'transport closed'));
  };
  void nc.closed().then(failPending, failPending);

  const reconnected = new Set<() => void>();
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type !== 'reconnect') continue;
      for (const listener of reconnected) {
        try {
          listener();
        } catch (thrown) {
          queueMicrotask(() => {
            throw thrown;
          });
        }
      }
    }
  })();

  /**
   * Throws, before a message is queued, what nats.js would throw when it is sent: a subject with whitespace, a
   * payload over the server's `max_payload`.
   */
  const checkMessage = (subject: string, data: Uint8Array) => {
    if (!subject || WHITESPACE.test(subject)) throw new TypeError(`invalid subject ${JSON.stringify(subject)}`);
    const max = nc.info?.max_payload;
    if (max !== undefined && data.length > max) throw new RangeError(`payload of ${data.length} bytes exceeds the server's max_payload (${max})`);
  };

  return {
    kind: 'nats',
    connection: nc,

    request(subject, data, timeoutMs, headers) {
      // As nats.js's `request`: a draining connection takes no new asks.
      if (nc.isClosed() || nc.isDraining()) return Promise.reject(new TransportError('CLOSED', 'transport closed'));
      try {
        checkMessage(subject, data);
      } catch (err) {
        return Promise.reject(err);
      }
      const token = (nextToken++).toString(36);
      return new Promise<Uint8Array>((resolve, reject) => {
        const timer = setTimeout(() => {
          if (settle(token)) reject(new TransportError('TIMEOUT', `request to '${subject}' timed out after ${timeoutMs} ms`));
        }, timeoutMs);
        pending.set(token, { subject, resolve, reject, timer });
        outbox.add(subject, data, inbox + token, headers ? toNats(headers) : undefined);
      });
    },

    publish(subject, data) {
      // As nats.js: a draining connection still sends until its subscriptions have drained.
      if (nc.isClosed()) throw new TransportError('CLOSED', 'transport closed');
      checkMessage(subject, data);
      try {
        outbox.add(subject, data);
      } catch (err) {
        throw mapError(err, nc);
      }
    },

    subscribe(subject: string, handler: Handler, options: SubscribeOptions = {}): Subscription {
      try {
        const sub = nc.subscribe(subject, {
          queue: options.queue,
          callback: (err, msg) => {
            // Errors here end the subscription (permissions, server-side close): nothing to deliver.
            if (err) return;
            arrived();
            const reply = msg.reply;
            const respond = reply
              ? (answer: Uint8Array) => {
                  try {
                    if (!nc.isClosed()) outbox.add(reply, answer);
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
        throw mapError(err, nc);
      }
    },

    async flush() {
      try {
        outbox.send();
        await nc.flush();
      } catch (err) {
        throw mapError(err, nc);
      }
    },

    onReconnect(listener) {
      reconnected.add(listener);
      return () => reconnected.delete(listener);
    },

    async close() {
      if (nc.isClosed()) return;
      if (nc.isDraining()) {
        await nc.closed();
        return;
      }
      outbox.send();
      await nc.drain();
    },
  };
}
