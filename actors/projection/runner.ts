import type { JournalEntry, Store } from '../../store/mod.js';
import { shardOf } from '../placement/shard.js';
import { Checkpoints, type CheckpointDoc } from './checkpoints.js';
import { LagWindow } from './lag.js';
import type { Partitioning, Projector } from './types.js';

export interface RunnerOptions {
  store: Store;
  projectors: Projector[];
  /** How many partitions the journal is split into (the same in every process of a deployment). */
  partitions: number;
  /** The partitions this runner applies now (all of them embedded; those of its shard leases over NATS). */
  owned: () => number[];
  /** Entries read per journal read. */
  batch: number;
  /** Names this runner's lag figures in the checkpoint records (no dots). */
  runnerId: string;
  /** Resolves when there may be new entries (a commit happened) or after `ms`, whichever is first. */
  waitForWork: (ms: number) => Promise<void>;
  /** The fallback poll interval: the longest the runner sleeps without a wake-up. */
  pollMs: number;
  /**
   * After a cycle that applied something, wait this long before the next (unless the batch was full): under
   * load the entries of several commits are applied in one cycle, so the runner's own commits take the
   * store's single writer lock (and its flush) a bounded number of times a second.
   */
  intervalMs?: number;
  /**
   * Told after each read how far behind the runner is: the age in ms of the oldest entry read (0 when none
   * was). The projection thread lowers its priority while this is small (`priority.ts`).
   */
  behind?: (ms: number) => void;
  log?: (msg: string, extra?: object) => void;
}

/** The partition of an entry: its shard's, or for a non-actor entry (shard -1) a hash of its key. */
export function partitionOf(entry: Pick<JournalEntry, 'shard' | 'key'>, partitions: number): number {
  return entry.shard >= 0 ? entry.shard % partitions : shardOf(entry.key, partitions);
}

/**
 * How long after a rebuild is asked for the runner of partition 0 resets the projector when other runners share
 * its partitions: they stop applying it once they read the rebuild's mark, and a batch read before it ends well
 * within this (a batch is at most a few thousand entries). Asking them to acknowledge would be exact; a runner
 * that asked for the rebuild again whenever its batch met the reset kept two or more runners resetting it in turn.
 */
const RESET_GRACE_MS = 5_000;

/**
 * Follows the journal for a set of projectors. Each cycle reads the checkpoint records (and resets a projector
 * whose rebuild was asked for, if it runs partition 0), reads the journal
 * from the lowest checkpoint of the partitions it owns, hands each projector the entries of its kinds and
 * partitions it has not applied yet, then stores the checkpoints (the batch's last seq for every owned
 * partition). A checkpoint is stored only after its entries are applied, so a crash between the two means
 * those entries are applied again: projectors are idempotent. Each partition has its own checkpoint, so
 * several runners (worker processes) split the journal between them by partition.
 */
export class ProjectionRunner {
  private readonly checkpoints: Checkpoints;
  private readonly lag = new Map<string, LagWindow>();
  private stopped = false;
  private loop: Promise<void> | null = null;

  constructor(private readonly o: RunnerOptions) {
    this.checkpoints = new Checkpoints(o.store);
    for (const p of o.projectors) this.lag.set(p.name, new LagWindow());
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Finishes the cycle under way, then stops. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let read = 0;
      try {
        read = await this.cycle();
      } catch (err) {
        this.o.log?.('projection cycle failed; retrying', { err: String(err instanceof Error ? err.stack ?? err : err) });
      }
      // A full batch means more is waiting: go on at once. Else sleep until a commit (or the poll) wakes us.
      if (read < this.o.batch && !this.stopped) {
        if (read > 0 && this.o.intervalMs) await new Promise((r) => setTimeout(r, this.o.intervalMs));
        await this.o.waitForWork(this.o.pollMs);
      }
    }
  }

  /** One read-apply-checkpoint cycle; returns how many entries it read. */
  async cycle(): Promise<number> {
    const { store, projectors, partitions, batch } = this.o;
    const owned = new Set(this.o.owned().filter((p) => p >= 0 && p < partitions));
    if (owned.size === 0 || projectors.length === 0) return 0;
    const docs = await Promise.all(projectors.map((p) => this.checkpoints.load(p.name)));
    // A rebuild asked for: the runner of partition 0 resets the projector here, between two of its batches, so
    // that nothing this runner applies straddles the reset (see `CheckpointDoc.resetting`). No runner applies it
    // until then. A reset that throws holds up no other projector, and is tried again at the next cycle.
    // Runners of other partitions (over NATS, other processes) stop applying it once they read the mark; one may
    // be half-way through a batch read before it, so the reset waits `RESET_GRACE_MS` from the request for those
    // to end. A runner of every partition has no batch in flight here, and resets at once.
    const alone = owned.size === partitions;
    const now = Date.now();
    const resets = await Promise.allSettled(
      projectors.map(async (projector, i) => {
        if (docs[i].resetting && owned.has(0) && (alone || now - docs[i].updated_at >= RESET_GRACE_MS)) docs[i] = await this.reset(projector, docs[i]);
      }),
    );
    const active = projectors.map((_, i) => resets[i].status === 'fulfilled' && !docs[i].resetting);
    let from = Infinity;
    docs.forEach((doc, i) => {
      if (active[i]) for (const p of owned) from = Math.min(from, doc.partitions[p] ?? 0);
    });
    const resetFailed = resets.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (from === Infinity) {
      if (resetFailed) throw resetFailed.reason;
      return 0;
    }
    const entries = await store.journal.read(from, batch);
    this.o.behind?.(entries.length ? Math.max(0, Date.now() - entries[0].at) : 0);
    if (entries.length === 0) return 0;
    const last = entries[entries.length - 1].seq;
    const parts = entries.map((e) => partitionOf(e, partitions));
    const partitioning: Partitioning = { count: partitions, of: (e) => partitionOf(e, partitions) };
    // Every projector applies its entries, then the checkpoints of those that succeeded are stored together,
    // in one group commit (as each projector finished, each checkpoint was a commit and a flush of its own).
    // A projector that throws keeps its checkpoint (its entries come again) and holds up no other.
    const applied = await Promise.allSettled(
      projectors.map(async (projector, i) => {
        if (!active[i]) return [];
        const doc = docs[i];
        const kinds = projector.kinds ? new Set(projector.kinds) : null;
        const mine = entries.filter((e, j) => owned.has(parts[j]) && e.seq > (doc.partitions[parts[j]] ?? 0) && (!kinds || kinds.has(e.kind)));
        if (mine.length) await projector.apply(mine, store, partitioning);
        return mine;
      }),
    );
    await Promise.all(
      projectors.map(async (projector, i) => {
        const outcome = applied[i];
        if (!active[i] || outcome.status === 'rejected') return;
        const doc = docs[i];
        const moved = new Map<number, number>();
        for (const p of owned) if ((doc.partitions[p] ?? 0) < last) moved.set(p, last);
        const window = this.lag.get(projector.name)!;
        const now = Date.now();
        for (const e of outcome.value) window.add(Math.max(0, now - e.at));
        const summary = window.summary(now);
        const saved = await this.checkpoints.save(projector.name, doc.epoch, moved, summary ? { id: this.o.runnerId, lag: { at: now, ...summary } } : undefined, Checkpoints.stale(doc, now));
        // A rebuild was asked for meanwhile: this batch is done, so the next cycle may reset and start over from 0.
        if (!saved) this.lag.set(projector.name, new LagWindow());
      }),
    );
    const failed = resetFailed ?? applied.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failed) throw failed.reason;
    return entries.length;
  }

  /**
   * Resets a projector whose rebuild was asked for (this runner has no batch of it in flight), then lets the
   * runners replay it. Returns its checkpoint record then: still `resetting` if another rebuild was asked for
   * meanwhile (reset again at the next cycle).
   */
  private async reset(projector: Projector, doc: CheckpointDoc): Promise<CheckpointDoc> {
    this.o.log?.('resetting a projection for its rebuild', { projector: projector.name, epoch: doc.epoch });
    await projector.reset(this.o.store);
    this.lag.set(projector.name, new LagWindow());
    return (await this.checkpoints.resetDone(projector.name, doc.epoch)) ?? (await this.checkpoints.load(projector.name));
  }
}
