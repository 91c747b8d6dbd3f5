import type { MessagePort } from 'node:worker_threads';
import type { Arrived } from './arrival.js';
import { isLiteralSubject, isSubscriptionSubject } from './subject.js';
import { TransportError, type Handler, type Headers, type Respond, type SubscribeOptions, type Subscription, type Transport, type TransportErrorCode } from './types.js';

/**
 * The transport between two threads of one process (the embedded default's edge thread and its main thread,
 * which hosts the actors): the thread's requests, publishes and subscriptions travel over a `MessagePort` to the
 * main thread's in-process transport, which serves them with its own semantics (wildcards, queue groups, first
 * answer wins, no responders, its timeouts). `portTransport` is the thread's side, `servePort` the main thread's.
 *
 * What one side sends during a turn of its event loop goes in one `postMessage` when the loop reaches its check
 * phase (`setImmediate`), as the NATS transport's outbox does (`nats-outbox.ts`): under load a message costs a
 * place in an array, not a message event of its own on the other side. Order is kept.
 */

/**
 * A frame's payload: its index among the payloads of the post that carries it (`Post`). The bytes travel
 * together, not as a typed array per frame: a structured clone (or a transfer) of each costs several
 * microseconds, and a busy turn sends dozens (bench/README.md, twenty-fourth session).
 */
type Payload = number;

/** What crosses the port. */
type Frame =
  | [op: 'req', id: number, subject: string, data: Payload, timeoutMs: number, headers: Headers | undefined]
  | [op: 'res', id: number, data: Payload]
  | [op: 'err', id: number, code: TransportErrorCode | null, message: string]
  | [op: 'pub', subject: string, data: Payload]
  | [op: 'sub', sid: number, subject: string, queue: string | undefined]
  | [op: 'unsub', sid: number]
  | [op: 'msg', sid: number, subject: string, data: Payload, headers: Headers | undefined, rid: number]
  | [op: 'respond', rid: number, data: Payload]
  | [op: 'flush', id: number]
  | [op: 'close', id: number];

/**
 * One post: the frames one side sent during a turn, and their payloads one after another in `bytes` (whose
 * buffer the post transfers), payload `i` ending at `ends[i]`. No payloads: `bytes` and `ends` are null.
 */
type Post = [frames: Frame[], bytes: Uint8Array | null, ends: number[] | null];

/** How long the serving side keeps a request's `respond` for a thread's handler that has not answered. */
const RESPOND_KEPT_MS = 10 * 60_000;

/** The room a post's payload buffer starts with; it doubles as needed. */
const PAYLOAD_ROOM = 16 * 1024;

/** Frames one side sends, posted once per turn of its event loop. */
class PortOutbox {
  private queue: Frame[] = [];
  private bytes = new Uint8Array(PAYLOAD_ROOM);
  private used = 0;
  private ends: number[] = [];
  private scheduled = false;

  constructor(private readonly port: MessagePort) {}

  add(frame: Frame): void {
    this.queue.push(frame);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.send);
  }

  /**
   * Copies a payload into this post's buffer and returns its index there. Copied now, not when the post goes:
   * the sender keeps its bytes and may change them once the call returns. Only the payload's own bytes cross,
   * not the larger buffer a view may sit in (msgpackr encodes into a buffer of 8 KiB or more).
   */
  payload(data: Uint8Array): Payload {
    const end = this.used + data.byteLength;
    if (end > this.bytes.byteLength) {
      const grown = new Uint8Array(Math.max(end, this.bytes.byteLength * 2));
      grown.set(this.bytes.subarray(0, this.used));
      this.bytes = grown;
    }
    this.bytes.set(data, this.used);
    this.used = end;
    return this.ends.push(end) - 1;
  }

  readonly send = (): void => {
    this.scheduled = false;
    if (this.queue.length === 0) return;
    const queue = this.queue;
    this.queue = [];
    if (this.ends.length === 0) {
      this.port.postMessage([queue, null, null] satisfies Post);
      return;
    }
    const post: Post = [queue, this.bytes, this.ends];
    const moved = this.bytes.buffer;
    this.bytes = new Uint8Array(PAYLOAD_ROOM);
    this.used = 0;
    this.ends = [];
    this.port.postMessage(post, [moved]);
  };
}

/**
 * The payloads of a post received, by index: views of the post's one buffer, which a handler that keeps its
 * payload keeps alive (the receivers here decode theirs at once).
 */
function payloadsOf(bytes: Uint8Array | null, ends: number[] | null): (i: Payload) => Uint8Array {
  return (i) => bytes!.subarray(i === 0 ? 0 : ends![i - 1], ends![i]);
}

function closedError(): TransportError {
  return new TransportError('CLOSED', 'transport closed');
}

/**
 * The thread's side: a `Transport` (kind `thread`) whose every operation the other end of `port` serves with
 * its in-process transport (`servePort`). Requests time out there, by the timeout given here. `arrived` runs
 * before the frames of each post from the other end are handled.
 */
export function portTransport(port: MessagePort, arrived: Arrived = () => {}): Transport {
  const out = new PortOutbox(port);
  const pending = new Map<number, { resolve: (d: Uint8Array) => void; reject: (e: Error) => void }>();
  /** Keeps the thread alive while it awaits an answer (a promise alone does not), and only then. */
  const awaiting = (id: number, p: { resolve: (d: Uint8Array) => void; reject: (e: Error) => void }) => {
    if (pending.size === 0) port.ref();
    pending.set(id, p);
  };
  const settled = (id: number) => {
    const p = pending.get(id);
    if (p && pending.delete(id) && pending.size === 0) port.unref();
    return p;
  };
  const handlers = new Map<number, Handler>();
  let nextId = 1;
  let closed = false;

  const respondTo = (rid: number): Respond | null => (rid ? (data) => void (!closed && out.add(['respond', rid, out.payload(data)])) : null);
  port.on('message', ([frames, bytes, ends]: Post) => {
    arrived();
    const payload = payloadsOf(bytes, ends);
    for (const f of frames) {
      if (f[0] === 'msg') {
        const handler = handlers.get(f[1]);
        try {
          handler?.(payload(f[3]), respondTo(f[5]), f[2], f[4]);
        } catch (err) {
          // Reported as the other transports report a handler's throw (uncaught), without losing the rest of the batch.
          queueMicrotask(() => {
            throw err;
          });
        }
      } else if (f[0] === 'res') {
        settled(f[1])?.resolve(payload(f[2]));
      } else if (f[0] === 'err') {
        settled(f[1])?.reject(f[2] ? new TransportError(f[2], f[3]) : new TypeError(f[3]));
      }
    }
  });
  // An idle port keeps no thread alive (`awaiting` refs it while answers are due).
  port.unref();

  /** A round trip to the serving side: resolves once it has handled everything sent before. */
  const roundTrip = (op: 'flush' | 'close'): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const id = nextId++;
      awaiting(id, { resolve: () => resolve(), reject });
      out.add([op, id]);
      out.send();
    });

  return {
    kind: 'thread',

    request(subject, data, timeoutMs, headers) {
      if (closed) return Promise.reject(closedError());
      if (!isLiteralSubject(subject)) return Promise.reject(new TypeError(`invalid subject '${subject}'`));
      return new Promise<Uint8Array>((resolve, reject) => {
        const id = nextId++;
        awaiting(id, { resolve, reject });
        out.add(['req', id, subject, out.payload(data), timeoutMs, headers]);
      });
    },

    publish(subject, data) {
      if (closed) throw closedError();
      if (!isLiteralSubject(subject)) throw new TypeError(`invalid subject '${subject}'`);
      out.add(['pub', subject, out.payload(data)]);
    },

    subscribe(subject: string, handler: Handler, options: SubscribeOptions = {}): Subscription {
      if (closed) throw closedError();
      if (!isSubscriptionSubject(subject)) throw new TypeError(`invalid subject '${subject}'`);
      const sid = nextId++;
      handlers.set(sid, handler);
      out.add(['sub', sid, subject, options.queue]);
      return {
        unsubscribe() {
          if (!handlers.delete(sid) || closed) return;
          out.add(['unsub', sid]);
        },
      };
    },

    flush() {
      if (closed) return Promise.reject(closedError());
      return roundTrip('flush');
    },

    async close() {
      if (closed) return;
      // Like a NATS drain: what was sent before close is served; then the other side drops this side's subscriptions.
      await roundTrip('close').catch(() => undefined);
      closed = true;
      handlers.clear();
      for (const p of pending.values()) p.reject(closedError());
      pending.clear();
      port.close();
    },
  };
}

/**
 * The serving side: serves the frames of a `portTransport` at the other end of `port` with `inner` (this
 * thread's in-process transport), until that side closes or `stop()`. `toBytes` turns what `inner` delivers
 * into bytes that survive the copy to the other thread: the actors' in-process payloads are values, not bytes
 * (`actors/protocol.ts`, `encodeFor`). `arrived` runs before the frames of each post from that side are handled.
 */
export function servePort(
  inner: Transport,
  port: MessagePort,
  toBytes: (data: Uint8Array) => Uint8Array = (d) => d,
  arrived: Arrived = () => {},
): { stop(): void } {
  const out = new PortOutbox(port);
  const subs = new Map<number, Subscription>();
  /** Requests delivered to the thread's handlers, by id, until answered (or kept too long). */
  const responds = new Map<number, { respond: Respond; at: number }>();
  let nextRid = 1;

  const sweep = setInterval(() => {
    const old = Date.now() - RESPOND_KEPT_MS;
    for (const [rid, r] of responds) if (r.at < old) responds.delete(rid);
  }, 60_000);
  sweep.unref();

  const stop = () => {
    clearInterval(sweep);
    for (const s of subs.values()) s.unsubscribe();
    subs.clear();
    responds.clear();
  };
  const fail = (id: number, err: unknown) => {
    const code = err instanceof TransportError ? err.code : null;
    out.add(['err', id, code, err instanceof Error ? err.message : String(err)]);
  };

  port.on('message', ([frames, bytes, ends]: Post) => {
    arrived();
    const payload = payloadsOf(bytes, ends);
    for (const f of frames) {
      switch (f[0]) {
        case 'req': {
          const id = f[1];
          inner.request(f[2], payload(f[3]), f[4], f[5]).then((data) => out.add(['res', id, out.payload(toBytes(data))]), (err) => fail(id, err));
          break;
        }
        case 'pub':
          try {
            inner.publish(f[1], payload(f[2]));
          } catch {
            // Closed here: a one-way message is dropped, as NATS drops one after a drain.
          }
          break;
        case 'sub': {
          const sid = f[1];
          try {
            subs.set(sid, inner.subscribe(f[2], (data, respond, subject, headers) => {
              let rid = 0;
              if (respond) {
                rid = nextRid++;
                responds.set(rid, { respond, at: Date.now() });
              }
              out.add(['msg', sid, subject, out.payload(toBytes(data)), headers, rid]);
            }, { queue: f[3] }));
          } catch {
            // Closed here (the process is stopping): nothing will be delivered, as after a drain.
          }
          break;
        }
        case 'unsub':
          subs.get(f[1])?.unsubscribe();
          subs.delete(f[1]);
          break;
        case 'respond': {
          const r = responds.get(f[1]);
          responds.delete(f[1]);
          r?.respond(payload(f[2]));
          break;
        }
        case 'flush':
        case 'close': {
          const [op, id] = f;
          // After every delivery queued before it (the in-process flush), so they reach the thread first.
          inner.flush().then(() => {
            if (op === 'close') stop();
            out.add(['res', id, out.payload(new Uint8Array(0))]);
          }, (err) => fail(id, err));
          break;
        }
      }
    }
  });
  // The process's lifetime is its own business (its drain), not this port's.
  port.unref();
  return { stop };
}
