import type { SnapshotPutResult, SnapshotStore, SnapshotWrite } from '../store/mod.js';

interface Pending {
  write: SnapshotWrite;
  resolve: (r: SnapshotPutResult) => void;
  reject: (e: unknown) => void;
}

/**
 * Group commit: the snapshot writes that arrive within one run of the microtask queue go to the store
 * together in one `putMany`. The hand-over is a microtask, not a later event-loop turn: the embedded store
 * groups every write of a turn into one durable commit itself (`Env.batch`), so the snapshot joins the
 * records its event projected in that same commit instead of waiting a turn for a second one. A batch does
 * not wait for the one before it (a backend that can overlap commits may). Each write still succeeds or fails
 * on its own compare-and-set. On a store durable in queue order an actor may have several writes in flight
 * (its pipelined mailbox), in one batch or in successive ones, judged in the order they were put; on any other
 * its mailbox awaits each, so batches never race on a key.
 */
export class CommitQueue {
  private pending: Pending[] = [];
  private scheduled = false;
  /** Batches written and writes in them, for the runtime's figures. */
  readonly stats = { batches: 0, writes: 0 };

  /**
   * `committed` is told after each batch that appended journal entries is durable (the projection runner's
   * wake-up).
   */
  constructor(
    private readonly snapshots: SnapshotStore,
    private readonly committed?: () => void,
  ) {}

  put(write: SnapshotWrite): Promise<SnapshotPutResult> {
    return new Promise((resolve, reject) => {
      this.pending.push({ write, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      queueMicrotask(() => this.flush());
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.pending;
    this.pending = [];
    this.stats.batches++;
    this.stats.writes += batch.length;
    this.snapshots.putMany(batch.map((p) => p.write)).then(
      (results) => {
        batch.forEach((p, i) => p.resolve(results[i]));
        if (this.committed && results.some((r) => r.ok && r.seq !== undefined)) this.committed();
      },
      (err) => batch.forEach((p) => p.reject(err)),
    );
  }
}
