import type { JournalStore, SnapshotStore } from '../store/mod.js';
import { Activation, type ActivationContext } from './activation.js';
import { ActorSystem } from './actor-system.js';
import { CommitQueue } from './commit.js';
import type { ActorKind } from './kinds.js';
import type { Placement } from './placement/types.js';
import { decode, encodeFor, isInProcess, shardSubject, type Envelope, type Reply } from './protocol.js';
import { WAKE_INDEX_REFRESH_MS, WAKE_SCAN_LIMIT } from './wake-index.js';
import type { Headers, Subscription, Transport } from './transport/types.js';

export interface HostOptions {
  transport: Transport;
  placement: Placement;
  snapshots: SnapshotStore;
  /** The journal the snapshots' steps are appended to (read for the answer to a retried event). */
  journal: JournalStore;
  kinds: Map<string, ActorKind>;
  /** An actor idle this long is persisted already and dropped from memory. */
  passivateAfterMs: number;
  /** How often the scheduler looks for due durable timers. */
  timerTickMs?: number;
  /** How close to its indexed wake-up time a step moves an actor's index entry to its real deadline (default `WAKE_INDEX_REFRESH_MS`). */
  wakeIndexRefreshMs?: number;
  /** How many due index entries one scan of the scheduler takes, the earliest first (default `WAKE_SCAN_LIMIT`). */
  wakeScanLimit?: number;
  /** Told after each group commit that appended journal entries is durable (wakes the projection runner). */
  committed?: () => void;
  /** Told when this host starts or stops serving a shard (the projection runner's partitions follow). */
  shardsChanged?: () => void;
  log?: (msg: string, extra?: object) => void;
}

/**
 * The actor host of a worker (the catalog of live activations, as Orleans calls it). It serves the shards
 * its placement hands it: subscribes to their subjects, activates actors on first message (or when a
 * durable timer is due), runs their mailboxes, passivates idle ones, and gives shards up on request.
 */
export class Host {
  private readonly activations = new Map<string, Activation>();
  private readonly subscriptions = new Map<number, Subscription>();
  private readonly commit: CommitQueue;
  private sweeper: NodeJS.Timeout | null = null;
  private ticker: NodeJS.Timeout | null = null;
  private stopping = false;

  private readonly context: ActivationContext;

  constructor(private readonly o: HostOptions) {
    this.commit = new CommitQueue(o.snapshots, o.committed);
    // Every hosted kind has a sample from the start, 0 included (`liveActorsByKind`).
    for (const kind of o.kinds.keys()) this.expiredByKind[kind] = 0;
    this.context = {
      system: new ActorSystem(),
      snapshots: o.snapshots,
      journal: o.journal,
      commit: this.commit,
      wakeIndexRefreshMs: o.wakeIndexRefreshMs ?? WAKE_INDEX_REFRESH_MS,
      fenceOf: (shard) => o.placement.fenceOf(shard),
      ended: (a) => {
        if (this.activations.get(a.key) === a) this.activations.delete(a.key);
      },
      expired: (kind) => {
        this.expiredByKind[kind] = (this.expiredByKind[kind] ?? 0) + 1;
      },
      log: o.log,
    };
  }

  /**
   * Events skipped because their askers had given up, by kind, since the host started (the Prometheus counter):
   * a backlog older than the askers' deadlines.
   */
  readonly expiredByKind: Record<string, number> = {};

  /** Live actors now. */
  get liveActors(): number {
    return this.activations.size;
  }

  /** Live actors now, by kind (the Prometheus gauge). */
  liveActorsByKind(): Record<string, number> {
    // Every hosted kind has a sample, 0 included: a series that appears only once it is non-zero cannot be
    // told apart from a process that does not count it.
    const out: Record<string, number> = {};
    for (const kind of this.o.kinds.keys()) out[kind] = 0;
    for (const key of this.activations.keys()) {
      const kind = key.slice(0, key.indexOf('/'));
      out[kind] = (out[kind] ?? 0) + 1;
    }
    return out;
  }

  /** The shards this host serves now (held, and not being released). */
  servedShards(): number[] {
    return [...this.subscriptions.keys()].filter((s) => this.o.placement.fenceOf(s) !== null).sort((a, b) => a - b);
  }

  /** Group-commit figures: batches written and writes in them. */
  get commitStats(): { batches: number; writes: number } {
    return { ...this.commit.stats };
  }

  async start(): Promise<void> {
    const changed = () => this.o.shardsChanged?.();
    await this.o.placement.start({
      acquired: (shard) => {
        this.serve(shard);
        changed();
      },
      releasing: async (shard) => {
        // `release` stops serving at once (then passivates): the runner drops the partition before the
        // shard goes to its next owner.
        const released = this.release(shard);
        changed();
        await released;
      },
      lost: (shard) => {
        this.drop(shard);
        changed();
      },
    });
    const sweepEvery = Math.max(50, Math.min(1000, Math.floor(this.o.passivateAfterMs / 2)));
    this.sweeper = setInterval(() => this.sweep(), sweepEvery);
    const tick = this.o.timerTickMs ?? 200;
    const scan = () => {
      this.ticker = setTimeout(() => void this.wakeDue(tick).finally(() => !this.stopping && scan()), tick);
    };
    scan();
  }

  /** Gives every shard back (passivating its actors first) and stops. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.sweeper) clearInterval(this.sweeper);
    if (this.ticker) clearTimeout(this.ticker);
    await this.o.placement.stop();
    await Promise.all([...this.activations.values()].map((a) => a.passivate()));
    this.context.system.close();
  }

  /** Passivates every idle actor now (for tests and for measuring memory). */
  async passivateIdle(): Promise<number> {
    const idle = [...this.activations.values()].filter((a) => a.idle);
    await Promise.all(idle.map((a) => a.passivate()));
    return idle.length;
  }

  private serve(shard: number): void {
    if (this.subscriptions.has(shard)) return;
    const sub = this.o.transport.subscribe(shardSubject(shard), (data, respond, _subject, headers) => {
      const answer = (r: Reply) => respond?.(encodeFor(this.o.transport, r));
      this.receive(shard, data, answer, headers);
    });
    this.subscriptions.set(shard, sub);
  }

  private receive(shard: number, data: Uint8Array, answer: (r: Reply) => void, headers?: Headers): void {
    if (this.o.placement.fenceOf(shard) === null) {
      answer({ ok: false, code: 'NOT_OWNER', message: `shard ${shard} is not held here`, retry: true });
      return;
    }
    let envelope: Envelope;
    try {
      envelope = decode<Envelope>(data);
    } catch {
      answer({ ok: false, code: 'BAD_REQUEST', message: 'undecodable message', retry: false });
      return;
    }
    const { kind, id, event, eventId } = envelope ?? ({} as Envelope);
    if (typeof kind !== 'string' || typeof id !== 'string' || typeof eventId !== 'string' || typeof event?.type !== 'string') {
      answer({ ok: false, code: 'BAD_REQUEST', message: 'kind, id, eventId and event.type are required', retry: false });
      return;
    }
    const key = `${kind}/${id}`;
    if (this.o.placement.shardOf(key) !== shard) {
      answer({ ok: false, code: 'BAD_REQUEST', message: `${key} is not in shard ${shard}: shard counts differ`, retry: false });
      return;
    }
    const activation = this.activate(key, shard);
    if (!activation) {
      answer({ ok: false, code: 'UNKNOWN_KIND', message: `no actor kind ${kind}`, retry: false });
      return;
    }
    // An ordered ask from another thread or process shares no commit order with this host, nor does any ask
    // when the store's commits may complete out of order: it waits for durability as any other.
    activation.deliver(envelope, answer, headers, envelope.ordered === true && isInProcess(data) && this.o.snapshots.durableInOrder);
  }

  private activate(key: string, shard: number): Activation | null {
    const live = this.activations.get(key);
    if (live) return live;
    const slash = key.indexOf('/');
    const kind = this.o.kinds.get(key.slice(0, slash));
    if (!kind) return null;
    const activation = new Activation(this.context, kind, key, shard);
    this.activations.set(key, activation);
    return activation;
  }

  /**
   * Durable timers: wakes the actors indexed within the next tick. A passivated one is activated, which restarts
   * its timers; a live one has them running, and hears of it only so that an index entry kept earlier than its
   * deadline (`wakeIndexTime`) is moved on rather than found again at every scan.
   */
  private async wakeDue(tick: number): Promise<void> {
    const shards = this.o.placement.owned().filter((s) => this.o.placement.fenceOf(s) !== null);
    if (!shards.length) return;
    try {
      const before = Date.now() + tick;
      const due = await this.o.snapshots.due(shards, before, this.o.wakeScanLimit ?? WAKE_SCAN_LIMIT);
      for (const { key } of due) this.activate(key, this.o.placement.shardOf(key))?.wake(before);
    } catch (err) {
      this.o.log?.('timer scan failed', { err: String(err) });
    }
  }

  private sweep(): void {
    const cutoff = Date.now() - this.o.passivateAfterMs;
    for (const a of this.activations.values()) if (a.idle && a.lastActive <= cutoff) void a.passivate();
    this.o.placement.reportLiveActors(this.activations.size);
  }

  private async release(shard: number): Promise<void> {
    this.subscriptions.get(shard)?.unsubscribe();
    this.subscriptions.delete(shard);
    await Promise.all([...this.activations.values()].filter((a) => a.shard === shard).map((a) => a.passivate()));
  }

  private drop(shard: number): void {
    this.subscriptions.get(shard)?.unsubscribe();
    this.subscriptions.delete(shard);
    for (const a of [...this.activations.values()]) if (a.shard === shard) a.abandon(`lease of shard ${shard} lost`);
  }
}
