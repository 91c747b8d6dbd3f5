import type { JournalEntry, Store } from '../../store/mod.js';

/**
 * A read model built from the journal. The runner (`runner.ts`) hands it the entries it reads, in seq order,
 * off the reply path; its checkpoint is stored after each batch is applied, so after a crash a batch may be
 * applied again: `apply` must be idempotent (e.g. `putNewer` keyed by the entry's version, or writes keyed
 * by the entry's seq).
 */
export interface Projector {
  /** Stable name: its checkpoint id and the argument of `switchboard rebuild <name>`. */
  name: string;
  /** Entry kinds it reads ('conversation', 'session', 'call', 'edge', ...); all when absent. */
  kinds?: string[];
  /**
   * Applies entries in seq order. Idempotent: after a crash it may see an entry again. `partitions`: which
   * partition of the journal each entry is in (the runner's; absent, all of them are in one).
   */
  apply(entries: JournalEntry[], store: Store, partitions?: Partitioning): Promise<void>;
  /** Drops everything it wrote (before a rebuild from seq 0). */
  reset(store: Store): Promise<void>;
}

/**
 * How the runner splits the journal: one runner at a time applies a partition, its entries in seq order, so a
 * read model kept per partition can tell an entry it applied already by its seq alone.
 */
export interface Partitioning {
  /** How many partitions there are (the same in every process of a deployment). */
  count: number;
  /** The partition of an entry. */
  of(entry: JournalEntry): number;
}

/** How far one projector has got, as `GET /admin/v1/runtime/projections` shows it. */
export interface ProjectorStatus {
  name: string;
  kinds: string[] | null;
  /** The lowest checkpoint over its partitions: every entry up to this seq is applied. */
  checkpoint: number;
  /** Each partition's checkpoint. */
  partitions: number[];
  /** The journal's head when this was read. */
  head: number;
  /** Entries between the checkpoint and the head (counting those of other kinds it skips). */
  behind: number;
  /** Incremented by each rebuild. */
  epoch: number;
  /**
   * Entries set aside in this epoch: their projection failed on every attempt, and the checkpoint moved past
   * them (`projection_skipped`; a rebuild projects them again).
   */
  skipped: number;
  /** Commit-to-applied lag over the runners' recent entries (ms), null before any was applied. */
  lag: { p50: number; p99: number; samples: number } | null;
}
