import type { MsgHdrs, NatsConnection } from '@nats-io/transport-node';

/** One queued message: subject, payload, and the reply subject and headers of a request. */
type Queued = [subject: string, data: Uint8Array, reply: string | undefined, headers: MsgHdrs | undefined];

/**
 * The messages a NATS transport sends, written to the connection once per turn of the event loop.
 *
 * nats.js writes its outbound buffer to the socket at the end of the microtask checkpoint in which a message
 * was published, and every I/O callback (an HTTP request read, a NATS message delivered, a commit resolved)
 * ends in a checkpoint of its own. So an edge wrote each ask, and a worker each reply, in a socket write of its
 * own: a system call, and a read of its own for nats-server. Queued here, the messages published during one
 * turn of the loop are handed to nats.js in one synchronous run when the loop reaches its check phase
 * (`setImmediate`), and go out in one write. They keep their order; a message is never sent earlier than
 * before, only up to the end of the loop's current turn later.
 */
export class Outbox {
  private queue: Queued[] = [];
  private scheduled = false;

  /**
   * @param nc the connection written to.
   * @param failed called with the reply subject of each queued request that nats.js refused when it was
   *   finally sent (the connection closed meanwhile): its asker fails now instead of at its timeout.
   */
  constructor(
    private readonly nc: NatsConnection,
    private readonly failed: (reply: string, err: unknown) => void,
  ) {}

  /**
   * Queues a message; the caller has checked the subject. While the connection drains, the message (after
   * any still queued) goes to nats.js at once, as it did before the outbox: nats.js stops taking messages
   * once the subscriptions have drained, which may come before this turn of the loop ends. Then a refusal
   * throws (nats.js's error) to the caller.
   */
  add(subject: string, data: Uint8Array, reply?: string, headers?: MsgHdrs): void {
    if (this.nc.isDraining()) {
      this.send();
      this.publish([subject, data, reply, headers]);
      return;
    }
    this.queue.push([subject, data, reply, headers]);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.send);
  }

  /** Hands everything queued to nats.js now (before a flush, a drain, or a close). */
  readonly send = (): void => {
    this.scheduled = false;
    const queue = this.queue;
    if (queue.length === 0) return;
    this.queue = [];
    for (const message of queue) {
      try {
        this.publish(message);
      } catch (err) {
        // Closed or draining since it was queued: a one-way message is dropped as NATS would drop it.
        if (message[2]) this.failed(message[2], err);
      }
    }
  };

  private publish([subject, data, reply, headers]: Queued): void {
    this.nc.publish(subject, data, reply || headers ? { reply, headers } : undefined);
  }
}
