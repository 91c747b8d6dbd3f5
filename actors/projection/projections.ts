import type { Store, StoreOptions } from '../../store/mod.js';
import { loadProjectors } from './loading.js';
import { ProjectionStatus } from './status.js';
import { ProjectionThread } from './thread.js';

/** Settings of the projections (`PROJECTION_*`, docs/configuration.md). */
export interface ProjectionOptions {
  /** How the runner's thread opens the store (the process's own store settings). */
  store: StoreOptions;
  /** Extra modules exporting `projectors()`. */
  modules: string[];
  /** Partitions of the journal (at most the shard count): the most runners that can share the work. */
  partitions: number;
  /** Entries per journal read. */
  batch: number;
  /** The runner's fallback poll interval (it is woken after each local commit). */
  pollMs: number;
  /** The least time between two cycles that applied entries (so commits are grouped under load). */
  intervalMs: number;
  /** How much lower the runner thread's priority is while it keeps up (`nice` steps; 0: never lower). */
  nice: number;
  /** The lag (ms) at which the runner thread takes its normal priority back. */
  yieldBelowMs: number;
}

/**
 * A process's view of the projections: their status (any process), and in a worker the runner's thread,
 * applying the partitions whose shards this worker holds.
 */
export class Projections {
  private thread: ProjectionThread | null = null;

  constructor(
    readonly status: ProjectionStatus,
    private readonly o: ProjectionOptions,
  ) {}

  /** Loads the projectors; starts nothing yet. */
  static async open(store: Store, o: ProjectionOptions, shardCount: number): Promise<Projections> {
    const projectors = await loadProjectors(o.modules);
    return new Projections(new ProjectionStatus(store, projectors, Math.max(1, Math.min(o.partitions, shardCount))), o);
  }

  get partitions(): number {
    return this.status.partitions;
  }

  /** Starts the runner's thread for the given partitions (a worker process). No projectors: no thread. */
  async startRunner(owned: number[], runnerId: string, log?: (msg: string, extra?: object) => void, error?: (msg: string, extra?: object) => void): Promise<void> {
    if (this.thread || this.status.projectors.length === 0) return;
    this.thread = new ProjectionThread({
      store: this.o.store,
      modules: this.o.modules,
      partitions: this.partitions,
      owned,
      batch: this.o.batch,
      pollMs: this.o.pollMs,
      intervalMs: this.o.intervalMs,
      nice: this.o.nice,
      yieldBelowMs: this.o.yieldBelowMs,
      runnerId: runnerId.replace(/[^A-Za-z0-9_-]/g, '_'),
      log,
      error,
    });
    await this.thread.start();
  }

  /** The partitions the local runner applies now. */
  setOwned(partitions: number[]): void {
    this.thread?.setOwned(partitions);
  }

  /** New entries were committed here: wake the local runner, if any. */
  wake(): void {
    this.thread?.wake();
  }

  async stop(): Promise<void> {
    await this.thread?.stop();
    this.thread = null;
  }
}
