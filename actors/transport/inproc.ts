import { isLiteralSubject, isSubscriptionSubject, SubjectTree } from './subject.js';
import {
  TransportError,
  type Handler,
  type Headers,
  type Respond,
  type SubscribeOptions,
  type Subscription,
  type Transport,
} from './types.js';

interface Entry {
  subject: string;
  handler: Handler;
  queue: string | undefined;
  active: boolean;
}

interface Pending {
  reject(err: TransportError): void;
}

/** At most this many subjects' matches are kept (`matches`); past it they are dropped together. */
const MATCH_CACHE_SIZE = 10_000;

function closedError(): TransportError {
  return new TransportError('CLOSED', 'transport closed');
}

/**
 * The in-process transport: the embedded default, with the semantics of NATS core (wildcards, queue groups,
 * first answer wins, no responders) and no broker. Handlers run in a later microtask, never inside the
 * sender's call; payloads are passed by reference, as they are immutable by convention.
 */
export function createInprocTransport(): Transport {
  const tree = new SubjectTree<Entry>();
  const entries = new Set<Entry>();
  const pending = new Set<Pending>();
  let closed = false;
  /**
   * The entries matching each literal subject used since the subscriptions last changed: an actor or a session
   * is asked on the same subject message after message, and matching (and checking) it each time was a few
   * per cent of a message's CPU. Cleared by every subscribe and unsubscribe, and when it grows past
   * `MATCH_CACHE_SIZE` subjects.
   */
  const matches = new Map<string, Entry[]>();

  /** The entries matching `subject`, which it checks is a valid literal subject (a TypeError if not). */
  function matching(subject: string): Entry[] {
    let matched = matches.get(subject);
    if (matched) return matched;
    if (!isLiteralSubject(subject)) throw new TypeError(`invalid subject '${subject}'`);
    matched = tree.match(subject);
    if (matches.size >= MATCH_CACHE_SIZE) matches.clear();
    matches.set(subject, matched);
    return matched;
  }

  /** The recipients of one message: every plain subscriber and one random member of each queue group. */
  function recipients(subject: string): Entry[] {
    const matched = matching(subject);
    if (matched.length <= 1) return matched;
    const out: Entry[] = [];
    let groups: Map<string, Entry[]> | undefined;
    for (const e of matched) {
      if (e.queue === undefined) out.push(e);
      else {
        groups ??= new Map();
        const members = groups.get(e.queue);
        if (members) members.push(e);
        else groups.set(e.queue, [e]);
      }
    }
    if (groups) for (const members of groups.values()) out.push(members[Math.floor(Math.random() * members.length)]);
    return out;
  }

  function deliver(to: Entry[], subject: string, data: Uint8Array, respond: Respond | null, headers?: Headers): void {
    for (const e of to) {
      queueMicrotask(() => {
        if (e.active) e.handler(data, respond, subject, headers);
      });
    }
  }

  return {
    kind: 'inproc',

    request(subject, data, timeoutMs, headers) {
      if (closed) return Promise.reject(closedError());
      let to: Entry[];
      try {
        to = recipients(subject);
      } catch (err) {
        return Promise.reject(err);
      }
      if (to.length === 0) {
        return Promise.reject(new TransportError('NO_RESPONDERS', `no responders for '${subject}'`));
      }
      return new Promise<Uint8Array>((resolve, reject) => {
        let done = false;
        const entry: Pending = {
          reject(err) {
            if (done) return;
            done = true;
            clearTimeout(timer);
            pending.delete(entry);
            reject(err);
          },
        };
        const timer = setTimeout(
          () => entry.reject(new TransportError('TIMEOUT', `request to '${subject}' timed out after ${timeoutMs} ms`)),
          timeoutMs,
        );
        pending.add(entry);
        deliver(to, subject, data, (answer) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          pending.delete(entry);
          resolve(answer);
        }, headers);
      });
    },

    publish(subject, data) {
      if (closed) throw closedError();
      deliver(recipients(subject), subject, data, null);
    },

    subscribe(subject: string, handler: Handler, options: SubscribeOptions = {}): Subscription {
      if (closed) throw closedError();
      if (!isSubscriptionSubject(subject)) throw new TypeError(`invalid subject '${subject}'`);
      const entry: Entry = { subject, handler, queue: options.queue, active: true };
      tree.add(subject, entry);
      entries.add(entry);
      matches.clear();
      return {
        unsubscribe() {
          if (!entry.active) return;
          entry.active = false;
          tree.remove(subject, entry);
          entries.delete(entry);
          matches.clear();
        },
      };
    },

    flush() {
      if (closed) return Promise.reject(closedError());
      // Deliveries are microtasks queued in order, so this one runs after every earlier delivery.
      return new Promise<void>((resolve) => queueMicrotask(resolve));
    },

    async close() {
      if (closed) return;
      closed = true;
      // Like a NATS drain: what was sent before close still reaches its handlers.
      await new Promise<void>((resolve) => queueMicrotask(resolve));
      for (const e of entries) {
        e.active = false;
        tree.remove(e.subject, e);
      }
      entries.clear();
      matches.clear();
      for (const p of [...pending]) p.reject(closedError());
    },
  };
}
