import type { Store } from '../../store/mod.js';
import { Checkpoints, type CheckpointDoc } from './checkpoints.js';
import type { Projector, ProjectorStatus } from './types.js';

/** A runner that has not reported for this long is left out of the lag figures. */
const FRESH_MS = 60_000;

/**
 * What operators and tests see of the projections, read from the checkpoint records and the journal's head,
 * so any process of the deployment (the edge included) answers it the same.
 */
export class ProjectionStatus {
  private readonly checkpoints: Checkpoints;

  constructor(
    private readonly store: Store,
    readonly projectors: Projector[],
    readonly partitions: number,
  ) {
    this.checkpoints = new Checkpoints(store);
  }

  /** Each projector's checkpoint, head, and lag. */
  async all(): Promise<ProjectorStatus[]> {
    const head = await this.store.journal.head();
    return Promise.all(this.projectors.map(async (p) => this.describe(p, await this.checkpoints.records.get(p.name), head)));
  }

  /**
   * Waits until every projector's checkpoint has reached the journal's head as it is now (every entry
   * committed before the call is applied), or `timeoutMs` passes. `poke` runs between polls (to wake a
   * local runner). Returns whether they all got there, with the status then.
   */
  async waitForHead(timeoutMs: number, poke?: () => void): Promise<{ caughtUp: boolean; projections: ProjectorStatus[] }> {
    const head = await this.store.journal.head();
    const end = Date.now() + timeoutMs;
    for (;;) {
      const projections = await this.all();
      const caughtUp = projections.every((p) => p.checkpoint >= head);
      if (caughtUp || Date.now() >= end) return { caughtUp, projections };
      poke?.();
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** The projector called `name`, or undefined. */
  find(name: string): Projector | undefined {
    return this.projectors.find((p) => p.name === name);
  }

  /**
   * Rebuilds a projector from the journal: moves its checkpoints back to 0 in a new epoch, marked to be reset.
   * The runner of partition 0 drops what the projector wrote (`reset`) between two of its batches, then the
   * runners replay the journal into it from there while live projection of the others goes on. Returns its
   * status just after the request.
   *
   * The reset is not made here: this runs in the admin API's thread (or another process), while a runner may be
   * half-way through a batch of the old epoch. Whatever that batch wrote after such a reset stayed (a record),
   * whatever it wrote before was dropped (the record's document and postings), and the replay found the record
   * at its version and skipped the conversation for good. The runner resets only once its own batch is done, and
   * with its own instance of the projector, whose memory (live records, analysed terms) is dropped with it.
   */
  async rebuild(projector: Projector): Promise<ProjectorStatus> {
    await this.checkpoints.restart(projector.name);
    const head = await this.store.journal.head();
    return this.describe(projector, await this.checkpoints.records.get(projector.name), head);
  }

  private describe(p: Projector, doc: CheckpointDoc | null, head: number): ProjectorStatus {
    const partitions = Array.from({ length: this.partitions }, (_, i) => doc?.partitions[i] ?? 0);
    const checkpoint = Math.min(...partitions);
    const now = Date.now();
    const fresh = Object.values(doc?.runners ?? {}).filter((r) => now - r.at <= FRESH_MS && r.samples > 0);
    const lag = fresh.length
      ? { p50: Math.max(...fresh.map((r) => r.p50)), p99: Math.max(...fresh.map((r) => r.p99)), samples: fresh.reduce((n, r) => n + r.samples, 0) }
      : null;
    return { name: p.name, kinds: p.kinds ?? null, checkpoint, partitions, head, behind: Math.max(0, head - checkpoint), epoch: doc?.epoch ?? 0, skipped: doc?.skipped ?? 0, lag };
  }
}
