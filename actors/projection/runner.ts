import type { JournalEntry, Store } from '../../store/mod.js';
import { shardOf } from '../placement/shard.js';
import { Checkpoints, type CheckpointDoc } from './checkpoints.js';
import { LagWindow } from './lag.js';
import { Skipped } from './skipped.js';
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
  /**
   * Where an entry set aside and a projector held are logged (`ProjectionRunner.applyOrSetAside`), at error
   * level; `log` when absent.
   */
  error?: (msg: string, extra?: object) => void;
  /**
   * The wait before retry `attempt` (1, 2, ...) of a failed apply; `retryBackoff` when absent. Tests pass
   * `() => 0`, so that their cycles run through the retries at once.
   */
  backoffMs?: (attempt: number) => number;
}

/** How many times a batch (and then a single entry) is applied before the runner narrows it down (sets it aside). */
export const PROJECTION_ATTEMPTS = 4;
/** The first retry's wait; each next one doubles it, up to `PROJECTION_BACKOFF_MAX_MS`. */
export const PROJECTION_BACKOFF_MS = 100;
export const PROJECTION_BACKOFF_MAX_MS = 2_000;

/** The wait before retry `attempt` (1, 2, ...): 100, 200, 400 ms (at most 2 s). */
export function retryBackoff(attempt: number): number {
  return Math.min(PROJECTION_BACKOFF_MAX_MS, PROJECTION_BACKOFF_MS * 2 ** (attempt - 1));
}

/**
 * How many entries in a row a projector may have set aside with no apply succeeding between them: past that
 * the failure is not one entry's (a broken projector, the store down), and setting aside would empty the read
 * model entry by entry, so the projector holds at its checkpoint instead (`applyOrSetAside`).
 */
export const PROJECTION_SKIP_STREAK = 8;

/** A failure as the log and the skip record show it: its name and message, no stack. */
function describe(failure: unknown): string {
  return failure instanceof Error ? `${failure.name}: ${failure.message}` : String(failure);
}

/** What a projector's apply of one batch came to: the entries it applied, and those it set aside. */
interface Applied {
  entries: JournalEntry[];
  skipped: SetAside[];
}

/** An entry set aside, and why (`describe` of its last failure). */
interface SetAside {
  entry: JournalEntry;
  error: string;
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
 * those entries are applied again: projectors are idempotent. A failed apply is retried, and an entry that fails
 * every time is set aside (`applyOrSetAside`) rather than hold its projector for good. Each partition has its own checkpoint, so
 * several runners (worker processes) split the journal between them by partition.
 */
export class ProjectionRunner {
  private readonly checkpoints: Checkpoints;
  private readonly skipped: Skipped;
  /** Per projector, the entries set aside in a row with no apply succeeding between them. */
  private readonly streak = new Map<string, number>();
  private readonly lag = new Map<string, LagWindow>();
  private stopped = false;
  private loop: Promise<void> | null = null;

  constructor(private readonly o: RunnerOptions) {
    this.checkpoints = new Checkpoints(o.store);
    this.skipped = new Skipped(o.store);
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
    // A projector that throws keeps its checkpoint (its entries come again) and holds up no other. One that
    // fails on an entry every time has that entry set aside after its retries (`applyOrSetAside`).
    const applied = await Promise.allSettled(
      projectors.map(async (projector, i): Promise<Applied> => {
        if (!active[i]) return { entries: [], skipped: [] };
        const doc = docs[i];
        const kinds = projector.kinds ? new Set(projector.kinds) : null;
        const mine = entries.filter((e, j) => owned.has(parts[j]) && e.seq > (doc.partitions[parts[j]] ?? 0) && (!kinds || kinds.has(e.kind)));
        const skipped: SetAside[] = [];
        if (mine.length) await this.applyOrSetAside(projector, mine, partitioning, skipped);
        return { entries: mine, skipped };
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
        for (const e of outcome.value.entries) window.add(Math.max(0, now - e.at));
        const summary = window.summary(now);
        const runner = summary ? { id: this.o.runnerId, lag: { at: now, ...summary } } : undefined;
        if (outcome.value.skipped.length) await this.setAside(projector, doc.epoch, outcome.value.skipped);
        const saved = await this.checkpoints.save(projector.name, doc.epoch, moved, runner, Checkpoints.stale(doc, now), outcome.value.skipped.length);
        // A rebuild was asked for meanwhile: this batch is done, so the next cycle may reset and start over from 0.
        if (!saved) this.lag.set(projector.name, new LagWindow());
      }),
    );
    const failed = resetFailed ?? applied.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failed) throw failed.reason;
    return entries.length;
  }

  /**
   * Applies a projector's entries of a batch, retrying a failed apply `PROJECTION_ATTEMPTS` times with a
   * backoff; a batch that still fails is narrowed down by halves (each half applied once; a half that fails is
   * split again), and a single entry that fails all its attempts as well is set aside: added to `skipped`, which
   * the cycle records (`projection_skipped`) and logs at error level before it moves the checkpoint past them.
   * Without this, an entry whose projection throws every time (a projector's bug, a tenant's text that trips it)
   * held its projector at its checkpoint for good, every tenant's read model with it. A transient failure passes
   * within the retries and sets nothing aside. One that outlasts them is not an entry's: after
   * `PROJECTION_SKIP_STREAK` entries in a row set aside with no apply succeeding between them (every entry
   * fails: a broken projector, the store down), the runner sets no more aside and throws; the projector holds
   * at its checkpoint, as it did before, until an apply succeeds.
   */
  private async applyOrSetAside(projector: Projector, entries: JournalEntry[], partitioning: Partitioning, skipped: SetAside[]): Promise<void> {
    let failure: unknown;
    // A projector held (below) is tried once a cycle, as before: its retries would hold up the others' checkpoints.
    const held = (this.streak.get(projector.name) ?? 0) >= PROJECTION_SKIP_STREAK;
    for (let attempt = 1; attempt <= (held ? 1 : PROJECTION_ATTEMPTS); attempt++) {
      if (attempt > 1) await this.backoff(attempt - 1);
      try {
        await projector.apply(entries, this.o.store, partitioning);
        this.streak.delete(projector.name);
        return;
      } catch (err) {
        failure = err;
      }
      // A stop does not wait for the retries and the narrowing: the checkpoint stays, the next cycle starts over.
      if (this.stopped) throw failure;
    }
    if (held) throw failure;
    const streak = this.streak.get(projector.name) ?? 0;
    if (entries.length > 1) {
      this.o.log?.('projection batch failed on every attempt; narrowing it down to the entry that fails', { projector: projector.name, from: entries[0].seq, to: entries[entries.length - 1].seq, err: describe(failure) });
      await this.narrow(projector, entries, partitioning, skipped);
      return;
    }
    this.streak.set(projector.name, streak + 1);
    if (streak + 1 >= PROJECTION_SKIP_STREAK) {
      (this.o.error ?? this.o.log)?.('projection held: entries in a row failed on every attempt, so the fault is not one entry\'s; none is set aside until one applies', { projector: projector.name, streak: streak + 1, seq: entries[0].seq, err: describe(failure) });
      throw failure;
    }
    skipped.push({ entry: entries[0], error: describe(failure) });
  }

  /**
   * Applies `entries` (two or more) by halves, once each; a half that fails is split again, down to single
   * entries, which have their `PROJECTION_ATTEMPTS` (`applyOrSetAside`).
   */
  private async narrow(projector: Projector, entries: JournalEntry[], partitioning: Partitioning, skipped: SetAside[]): Promise<void> {
    const half = Math.ceil(entries.length / 2);
    for (const part of [entries.slice(0, half), entries.slice(half)]) {
      if (part.length === 1) {
        await this.applyOrSetAside(projector, part, partitioning, skipped);
        continue;
      }
      try {
        await projector.apply(part, this.o.store, partitioning);
        this.streak.delete(projector.name);
      } catch (err) {
        if (this.stopped) throw err;
        await this.narrow(projector, part, partitioning, skipped);
      }
    }
  }

  /**
   * Records the entries a projector set aside in a batch (durably, before its checkpoint moves past them) and
   * logs each at error level: the projection, the entry's seq and actor key and the error's message (no entry
   * value or event data, where a tenant's text is).
   */
  private async setAside(projector: Projector, epoch: number, entries: SetAside[]): Promise<void> {
    for (const { entry, error } of entries) {
      await this.skipped.record({ projection: projector.name, epoch, seq: entry.seq, key: entry.key, error });
      (this.o.error ?? this.o.log)?.('projection entry set aside: it failed on every attempt; `switchboard rebuild` projects it again once the cause is fixed', { projector: projector.name, seq: entry.seq, key: entry.key, err: error });
    }
  }

  private backoff(attempt: number): Promise<void> {
    const ms = (this.o.backoffMs ?? retryBackoff)(attempt);
    return ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve();
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
