/**
 * The persistence contract. Every backend (embedded LMDB, MongoDB) implements these interfaces with the
 * same semantics; `test/store.contract.ts` (run by `test/store.lmdb.test.ts` and `test/store.mongodb.test.ts`) holds them to it.
 *
 * Records are plain JSON-like documents with a string `id`. Queries are MongoDB filter documents, sorts are
 * MongoDB sort documents and updates are MongoDB update documents (`$set`, `$unset`, `$inc`, `$push`, ...),
 * so the MongoDB backend passes them through and the embedded backend evaluates them with mingo.
 */

/** A stored record. `id` is its primary key, unique within its collection. */
export type Doc = { id: string } & Record<string, unknown>;

/** A MongoDB query filter document, e.g. `{account_id: "acc_1", started_at: {$gte: "2026-01-01"}}`. */
export type Filter = Record<string, unknown>;

/** A MongoDB sort document. `id` is always appended as the final tie-breaker. */
export type Sort = Record<string, 1 | -1>;

/** A MongoDB update document (`$set`, `$unset`, `$inc`, `$push`, `$pull`, `$addToSet`, ...). */
export type Update = Record<string, unknown>;

/** A secondary index over one or more top-level fields, in order. Indexed fields should hold scalars. */
export interface IndexSpec {
  fields: string[];
  /** Reject a write that would give two records the same values for these fields. */
  unique?: boolean;
  /**
   * Unique only among records where every field of the index is present and not null (MongoDB partial
   * index on `$exists`), so optional unique fields such as a slug may be absent on many records.
   */
  sparse?: boolean;
}

/** Declares a collection. Declaring it again with the same name returns the same collection. */
export interface CollectionSpec {
  name: string;
  indexes?: IndexSpec[];
  /**
   * A read model: written by projectors from the journal (and rebuilt from it), plus the projection
   * checkpoints. The embedded store keeps read models in a file of their own (`read-models.mdb`) with its own
   * writer lock and flush, so projecting never holds up an actor's commit; MongoDB keeps them like any other
   * collection. Every declaration of a collection must say the same.
   */
  readModel?: boolean;
  /**
   * A top-level array field that only grows, as a conversation record's turns do: a `putNewer` of a record
   * extends the stored record's array (the items already stored are taken as they are). The embedded store
   * keeps the array apart from the record, and such a write stores only the items added, so a record that
   * grows by one item per write costs one item a write, not the whole array (any other write stores the array
   * afresh). Reads return the whole array. No index may name it. MongoDB stores the record whole. Every
   * declaration of a collection must say the same.
   */
  appended?: string;
}

export interface FindOptions {
  sort?: Sort;
  limit?: number;
  skip?: number;
}

export interface PageOptions {
  sort?: Sort;
  /** Page size, at least 1. */
  limit: number;
  /** The `next` of the previous page; omitted for the first page. Malformed cursors throw `StoreCursorError`. */
  cursor?: string;
}

/** One page of a keyset-paginated query. `next` is null after the last page. */
export interface Page<T> {
  items: T[];
  next: string | null;
}

export interface Collection<T extends Doc = Doc> {
  readonly name: string;
  /** Inserts a new record. Throws `StoreDuplicateError` when the id or a unique index value is taken. */
  insert(doc: T): Promise<T>;
  get(id: string): Promise<T | null>;
  findOne(filter: Filter, options?: { sort?: Sort }): Promise<T | null>;
  find(filter: Filter, options?: FindOptions): Promise<T[]>;
  /**
   * Keyset pagination: stable under concurrent inserts (no duplicates, no gaps for records that existed
   * when the walk began). The cursor is opaque and URL-safe.
   */
  page(filter: Filter, options: PageOptions): Promise<Page<T>>;
  count(filter: Filter): Promise<number>;
  /**
   * Applies `update` atomically to the first record matching `filter` (in `sort` order, else id order)
   * and returns the record as it is after the update, or null when nothing matched and `upsert` is off.
   * With `upsert`, a record is created from the equality fields of `filter` plus the update
   * (MongoDB semantics; `filter` must then name `id`). A filter that names fields besides `id` acts as a
   * compare-and-set: the update applies only if the record still matches.
   * Throws `StoreDuplicateError` when the result would break a unique index.
   */
  update(filter: Filter, update: Update, options?: { upsert?: boolean; sort?: Sort }): Promise<T | null>;
  /**
   * Stores `doc` whole, as given: inserts it, or replaces the record with its id when that record's
   * `versionField` (a top-level field) is a number lower than `doc`'s. Returns false and writes nothing when
   * the stored record's version is equal or higher, or missing (MongoDB's `$lt`). No filter is evaluated and
   * no update applied, so this is the cheap way to keep a projection that must never go back in time (a
   * record derived from a versioned actor snapshot). `doc` must not change until the promise settles.
   * Throws `TypeError` when `doc[versionField]` is not a finite number, `StoreDuplicateError` when `doc`
   * would break a unique index.
   */
  putNewer(doc: T, versionField: string): Promise<boolean>;
  /** Deletes every record matching `filter`; returns how many. */
  delete(filter: Filter): Promise<number>;
}

/** A persisted actor snapshot. `data` is opaque bytes (msgpackr-encoded by the actor host). */
export interface SnapshotRecord {
  key: string;
  /** Increases by one with every successful put; 0 means "no snapshot". */
  version: number;
  /** The fencing token of the writer that stored it (a placement lease revision). */
  fence: number;
  /** Shard of the actor, so a new shard owner can find its due timers. */
  shard: number;
  /**
   * When to wake the actor (ms since epoch), at or before its earliest pending deadline; null: never. The host
   * may keep an earlier time than the deadline (`actors/wake-index.ts`).
   */
  deadline: number | null;
  /** The stored state, as it was put (a fresh copy on every read). */
  data: unknown;
  updated_at: number;
  /** The `SnapshotPut.writer` of the put that stored it, when it named one. */
  writer?: number;
}

export interface SnapshotPut {
  /** Version the caller read (0 when it read none). The put fails unless it still matches. */
  expectedVersion: number;
  /** The writer's fencing token. The put fails when the stored snapshot carries a larger one. */
  fence: number;
  shard: number;
  /** See `SnapshotRecord.deadline`. A put that keeps the stored one leaves the store's index entry as it is. */
  deadline: number | null;
  /** Who writes: a number the writer picked for itself (the host: one per activation), stored with the snapshot. */
  writer?: number;
  /**
   * Only on top of the same `writer`'s own put: refused (reason `version`) unless the stored snapshot was put by
   * `writer`. A writer that queues a put before the one before it is durable sets it (the host's pipelined
   * mailbox): the version it expects is the one its earlier put would write, and if that put was refused because
   * another writer got there first, the other writer's snapshot has that version too.
   */
  chained?: boolean;
}

/** One write of a `putMany`. */
export interface SnapshotWrite extends SnapshotPut {
  key: string;
  /**
   * The state to store: a value msgpack can encode (plain objects, arrays, strings, numbers, booleans, null,
   * bytes). The store encodes it when it writes (the embedded store with each sub-database's shared shapes),
   * so it must not change until the put resolves.
   */
  data: unknown;
  /**
   * The actor step this snapshot commits. When present and the compare-and-set succeeds, its journal entry
   * (`key`, the new version, `value`, `events` and, when given, `reply`) is committed in the same transaction
   * as the snapshot; when the compare-and-set is refused nothing is appended. The key must be `kind/id`.
   */
  step?: JournalStep;
}

/** What an actor step's journal entry holds beside what the store fills in (`JournalEntry`). */
export interface JournalStep {
  value: unknown;
  events: JournalEvent[];
  /** The answer to the event that began the step (see `JournalEntry.reply`); absent for a step no event began. */
  reply?: unknown;
}

export type SnapshotPutResult =
  /** `seq` and `at`: the journal entry committed with it, when the write carried a `step`. */
  | { ok: true; version: number; seq?: number; at?: number }
  | { ok: false; reason: 'version' | 'fence'; current: { version: number; fence: number } };

export interface SnapshotStore {
  /**
   * Whether the `putMany` batches of one process become durable in the order they were made: the embedded
   * store's do (one writer, commits in queue order); MongoDB's overlap. The host answers an ordered ask before
   * its commit is durable only when they do (`AskOptions.ordered`).
   */
  readonly durableInOrder: boolean;
  get(key: string): Promise<SnapshotRecord | null>;
  /** Compare-and-set on `version`, refused for a stale `fence`. Never throws for a lost race. */
  put(key: string, data: unknown, put: SnapshotPut): Promise<SnapshotPutResult>;
  /**
   * Several puts at once (group commit): each is judged on its own exactly as `put` would, and the
   * embedded backend makes them durable in one transaction. Results are in the order of `writes`. Several
   * writes of one key are judged in order, each on what the one before it left (the embedded store; MongoDB's
   * host never sends two, its batches not being durable in order).
   */
  putMany(writes: SnapshotWrite[]): Promise<SnapshotPutResult[]>;
  /** Snapshots of these shards whose deadline is at or before `before`, earliest first. */
  due(shards: number[], before: number, limit: number): Promise<Array<{ key: string; deadline: number }>>;
  delete(key: string): Promise<void>;
  /**
   * The highest fence of any stored snapshot (0 when none is stored). The embedded placement writes with it
   * (at least 1): a data directory written over NATS, whose fences are lease revisions, stays writable embedded.
   */
  highestFence(): Promise<number>;
}

/** One domain event an actor step emitted (XState `emit`), as stored. */
export interface JournalEvent {
  type: string;
  data: Record<string, unknown>;
}

/** One committed actor step (or one non-actor record such as an edge's error counts). */
export interface JournalEntry {
  /** Global, strictly increasing in commit order (gaps allowed). */
  seq: number;
  /** `kind/id`, e.g. `conversation/abc` (`edge/<process>` for non-actor entries). */
  key: string;
  kind: string;
  id: string;
  /** The actor's shard (-1 for non-actor entries). */
  shard: number;
  /** The snapshot version this step committed (0 for non-actor entries). */
  version: number;
  /** Commit time, ms since epoch. */
  at: number;
  /** The machine's state value after the step (null for non-actor entries). */
  value: unknown;
  events: JournalEvent[];
  /**
   * The host's answer to the event that began the step, when one did: what a retry of that event is answered
   * (the actor's snapshot keeps only the recent event ids and the versions that applied them, as the answer
   * is most of what it would encode on every step). Host data, not a domain event: projectors ignore it.
   */
  reply?: unknown;
}

/**
 * The journal: every committed actor step with the events it emitted, under one global sequence. It is the
 * source of truth the read models are projected from (`actors/projection/`).
 */
export interface JournalStore {
  /** Entries with seq > after, in seq order, at most limit. */
  read(after: number, limit: number): Promise<JournalEntry[]>;
  /**
   * One actor's entries in version order; `last: n` gives its newest n (still oldest first). The embedded store
   * walks an actor's entries from its newest back (`store/lmdb/journal.ts`): its newest entries (`last`, a recent
   * `afterVersion`) and its first alone (`limit: 1`) cost what they return, anything else from its start costs
   * its whole journal, so a hot path asks for one of those. It gives them in commit order, which is version
   * order for an actor's steps; the two differ only for entries appended under an actor's key (version 0) and
   * for an actor whose snapshot was deleted and written again (its versions start over, and `afterVersion`
   * reads the newest run alone), neither of which the platform does. MongoDB sorts by version, then seq.
   */
  ofActor(key: string, opts?: { afterVersion?: number; limit?: number; last?: number }): Promise<JournalEntry[]>;
  /** Appends a non-actor entry (kind/id/shard -1/version 0), e.g. an edge's per-minute 5xx counts. */
  append(entry: Omit<JournalEntry, 'seq' | 'at'> & { at?: number }): Promise<number>;
  /** The highest seq committed (0 when empty). */
  head(): Promise<number>;
}

/** A backend: named collections, the snapshot store and the journal. */
export interface Store {
  /** `lmdb` or `mongodb`. */
  readonly backend: string;
  collection<T extends Doc = Doc>(spec: CollectionSpec): Collection<T>;
  readonly snapshots: SnapshotStore;
  readonly journal: JournalStore;
  /**
   * Makes this thread's next reads see every write committed so far, by any thread or process. The embedded
   * store reads through one snapshot per thread until that thread's next timers phase (lmdb-js); MongoDB's reads
   * are current already. Called when a thread learns that another wrote: a tenancy invalidation, whose
   * reloads must not read the revoked record back from an older snapshot; a webhook attempt, which must sign
   * with the secret a rotation committed on the edge a moment before.
   */
  refresh(): void;
  /**
   * The ids of other live processes that have this store's files open (the embedded store's LMDB reader
   * tables; a process appears there once it has read). Always empty for MongoDB, which any number of processes
   * share. Said at start-up: several processes on one embedded data directory risk a lost commit with lmdb-js
   * 3.5.6 (docs/storage.md).
   */
  otherProcesses(): number[];
  close(): Promise<void>;
}
