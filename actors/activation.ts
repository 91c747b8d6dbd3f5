import type { AnyActorRef } from 'xstate';
import type { JournalEntry, JournalEvent, JournalStep, JournalStore, SnapshotStore } from '../store/mod.js';
import type { ActorSystem } from './actor-system.js';
import type { CommitQueue } from './commit.js';
import type { ActorKind } from './kinds.js';
import type { Envelope, HostErrorCode, PersistedActor, Reply } from './protocol.js';
import { timings } from '../platform/timings.js';
import { contextFromHeaders, inSpan, SpanKind, tracingStarted } from '../platform/telemetry.js';
import type { Headers } from './transport/types.js';
import { earliestDeadline, MAX_TIMER_STEP_MS } from './timers.js';
import { persistedSnapshot } from './persisted.js';
import { wakeIndexTime } from './wake-index.js';

/** How many applied event ids (each with the version that applied it) an actor remembers for de-duplicating retries. */
export const REMEMBERED_EVENTS = 8;

type Job =
  /**
   * `at`: when it was delivered (performance.now), for step timings; 0 when they are off. `ordered`: answer
   * once the step's commit is queued (`AskOptions.ordered`, from this thread). `expires`: when its asker gives
   * up (performance.now; `Envelope.waitMs` from delivery), Infinity for none.
   */
  | { type: 'event'; envelope: Envelope; respond: (r: Reply) => void; at: number; headers?: Headers; ordered: boolean; expires: number }
  | { type: 'persist' }
  /** `before`: the scan's horizon (the scheduler wakes what is indexed at or before it). */
  | { type: 'wake'; before: number }
  | { type: 'stop'; done: () => void };

/** What every activation of a host shares (one object per host, not per actor: live actors are many). */
export interface ActivationContext {
  /** The XState system the host's actors live in (one, not one each: live actors are many). */
  system: ActorSystem;
  snapshots: SnapshotStore;
  /** Where the answer to a retry of an event an earlier activation applied is read (`JournalEntry.reply`). */
  journal: JournalStore;
  commit: CommitQueue;
  /** How close to its indexed wake-up time a step moves an actor's entry to its real deadline (`wakeIndexTime`). */
  wakeIndexRefreshMs: number;
  /** The lease's fencing token for a shard now, or null when this worker may not write it. */
  fenceOf: (shard: number) => number | null;
  /** Called once when an activation ends (passivated, stale or failed), to drop it from the catalog. */
  ended: (a: Activation) => void;
  /** Called for each event skipped because its asker had given up (`Envelope.waitMs`). */
  expired: (kind: string) => void;
  log?: (msg: string, extra?: object) => void;
}

/**
 * A machine's emitted event as journaled: `{type, data}`. An event shaped `{type, data: {...}}` keeps its
 * `data`; any other event's fields besides `type` become its `data`.
 */
export function journalEvent(emitted: { type: string } & Record<string, unknown>): JournalEvent {
  const { type, ...rest } = emitted;
  const data = rest.data;
  if (data !== null && typeof data === 'object' && !Array.isArray(data) && Object.keys(rest).length === 1) {
    return { type, data: data as Record<string, unknown> };
  }
  return { type, data: rest };
}

class HostFailure extends Error {
  constructor(
    readonly code: HostErrorCode,
    message: string,
    readonly retry: boolean,
  ) {
    super(message);
  }
}

/** Errors of a machine surface through the step that ran it, not through its subscription. */
const ignore = (): void => undefined;

/** The reply a job gets when the activation fails. */
const failureReply = (failure: HostFailure): Reply => ({ ok: false, code: failure.code, message: failure.message, retry: failure.retry });

/**
 * An activation's writer id (`SnapshotPut.writer`): random, so that two activations of one actor (a handover,
 * another process) differ. Never 0, which stands for "not written yet".
 */
const newWriter = (): number => 1 + Math.floor(Math.random() * 0xffff_fffe);

/**
 * How long after a step that starts an effect which resumes at once (`KindEffect.resumeAtOnce`) its actor is
 * indexed to be woken: a turn that outlives its owner is taken up this long after it began at the earliest (or
 * once the owner's shards are taken over). Long enough that the scheduler's scans seldom find turns still running
 * (each one found is written again, to move its entry on).
 */
const RESUME_AFTER_MS = 5_000;
/** The earlier of two deadlines (null: none). */
const earlier = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.min(a, b));

/**
 * One live actor: a mailbox that runs one job at a time, the XState actor, and the version of its stored
 * snapshot. Each step (an event and what it set off until the kind calls it settled, or a later transition:
 * a timer fired, an invoked promise settled) is committed as one write: the snapshot and the events the
 * machine emitted during it (`emit`), as one journal entry. An event's reply is sent only after that commit
 * is durable (an ordered ask's once it is queued, see `AskOptions.ordered`), and the kind's `published` hook
 * hears of the entry then, in commit order.
 *
 * On a store whose batches are durable in queue order (`SnapshotStore.durableInOrder`: the embedded store) the
 * mailbox is pipelined: it runs the next job once a step's commit is queued, not once it is durable. The next
 * step's write is queued behind it, expects the version it will write and is chained to it
 * (`SnapshotPut.chained`): if a write is refused, every write queued behind it is refused too, and the
 * activation fails. What must not run ahead of durability still waits: replies, the kind's `published` hook,
 * the answer to a retried event, passivation. On MongoDB, whose batches overlap, each job waits for its commit.
 */
export class Activation {
  lastActive = Date.now();
  private actor: AnyActorRef | null = null;
  /** The version the latest queued write makes (or the loaded one): what the next write expects. */
  private version = 0;
  /** This activation's writer id (`newWriter`), 0 until its first write. */
  private writer = 0;
  /** The latest queued commit, durable when this settles (null: none in flight). A failure fails the activation. */
  private durable: Promise<void> | null = null;
  /** The time the store indexes this actor under for wake-ups (`wakeIndexTime`): at or before its earliest deadline. */
  private indexed: number | null = null;
  /**
   * Recently applied event ids with the versions their steps wrote, oldest first (an array: smaller than a Map
   * when idle). Persisted with the snapshot; the answers are not (see `lastReply`).
   */
  private applied: Array<[string, number]> = [];
  /**
   * The latest event this activation applied and its answer (null: none since it loaded), for the retry most
   * likely to come. Every other answer is read from its step's journal entry (`JournalEntry.reply`): the stored
   * snapshot keeps only `applied`, as encoding the answers with every snapshot was most of its encoding, and a
   * live actor holds one answer, not eight.
   */
  private lastEventId: string | null = null;
  private lastReply: unknown = null;
  /** Jobs waiting their turn; null when none (an idle actor holds no array). */
  private queue: Job[] | null = null;
  private running = false;
  private inEvent = false;
  private persistQueued = false;
  private ended = false;
  /** What the machine emitted since the last commit: the next commit's journal events (null: nothing). */
  private emitted: JournalEvent[] | null = null;
  /** The kind's deadline (`ActorKind.deadline`) a timer is armed for, and that timer (null: none). */
  private deadlineAt: number | null = null;
  private deadlineTimer: ReturnType<typeof setTimeout> | null = null;
  /**
   * The kind's effect (`ActorKind.effect`): whether it is running, and how the step waiting to settle hears
   * that it failed (null: no step waits). Null for a kind without one: one field, as an idle actor is small.
   */
  private effect: { running: boolean; failed: ((err: unknown) => void) | null } | null = null;

  constructor(
    private readonly ctx: ActivationContext,
    private readonly kind: ActorKind,
    /** `kind/id`. */
    readonly key: string,
    readonly shard: number,
  ) {}

  private get id(): string {
    return this.key.slice(this.kind.name.length + 1);
  }
  /** Nothing queued, running or being committed: safe to passivate. */
  get idle(): boolean {
    // Not while the kind's effect runs (a restored one, or one no step waits for): passivated, its outcome would
    // have no actor to go to, and one that resumes at once would be woken to run again, and again.
    return !this.running && !this.queue?.length && this.durable === null && !this.effect?.running;
  }

  /**
   * Queues an event; `headers` carry the sender's trace context (the handling span continues it). `ordered`:
   * the asker's writes follow this step's through the host's commit queue, so the reply goes as soon as the
   * step's commit is queued (the host decides, `Envelope.ordered`).
   */
  deliver(envelope: Envelope, respond: (r: Reply) => void, headers?: Headers, ordered = false): void {
    let answered = false;
    const once = (r: Reply) => {
      if (answered) return;
      answered = true;
      respond(r);
    };
    const expires = typeof envelope.waitMs === 'number' && envelope.waitMs >= 0 ? performance.now() + envelope.waitMs : Infinity;
    this.push({ type: 'event', envelope, respond: once, at: timings ? performance.now() : 0, headers, ordered, expires });
  }

  /**
   * The scheduler's wake-up: its index entry is at or before `before`. Loads the actor (restarting its
   * timers) if it is not live, and moves an entry that came due before any real deadline to the real one.
   */
  wake(before: number): void {
    // One is enough: a busy actor's entry stays due across scans, and each would queue another.
    const queued = this.queue?.find((j): j is Extract<Job, { type: 'wake' }> => j.type === 'wake');
    if (queued) queued.before = Math.max(queued.before, before);
    else this.push({ type: 'wake', before });
  }

  /** Finishes what is queued, then stops the actor. Its state is already durable. */
  passivate(): Promise<void> {
    return new Promise((done) => this.push({ type: 'stop', done }));
  }

  /** Stops at once, answering what is queued with a retry: the shard's lease is gone. */
  abandon(reason: string): void {
    this.fail(new HostFailure('NOT_OWNER', reason, true));
  }

  private push(job: Job): void {
    if (this.ended) {
      if (job.type === 'event') job.respond({ ok: false, code: 'NOT_OWNER', message: 'actor moved', retry: true });
      if (job.type === 'stop') job.done();
      return;
    }
    (this.queue ??= []).push(job);
    if (!this.running) void this.pump();
  }

  private async pump(): Promise<void> {
    this.running = true;
    for (let job = this.queue?.shift(); job && !this.ended; job = this.queue?.shift()) {
      // A wake-up is not activity: the scheduler wakes a live actor at every scan while its entry is due.
      if (job.type !== 'wake') this.lastActive = Date.now();
      try {
        await (job.type === 'event' ? this.traced(job) : this.run(job));
      } catch (err) {
        this.failWith(err, job.type === 'event' ? job.respond : undefined);
      }
    }
    this.running = false;
    // A drained array keeps the backing store its pushes grew (about 17 slots); an idle actor holds none.
    if (!this.queue?.length) this.queue = null;
  }

  /**
   * Runs an event in an `actor.handle` server span, a child of the asker's span (from the message headers):
   * the effects the event starts (responder, sandbox functions, further asks) run inside it.
   */
  private traced(job: Extract<Job, { type: 'event' }>): Promise<void> {
    if (!tracingStarted()) return this.run(job);
    const kind = this.kind.name;
    const attributes = {
      'actor.kind': kind,
      'actor.id': this.id,
      'actor.event': job.envelope.event.type,
      'actor.shard': this.shard,
      ...(kind === 'conversation' ? { 'conversation.id': this.id } : {}),
    };
    return inSpan('actor.handle', { kind: SpanKind.SERVER, attributes, parent: contextFromHeaders(job.headers) }, () => this.run(job));
  }

  private async run(job: Job): Promise<void> {
    if (job.type === 'stop') {
      // Its state is durable first (a commit that failed has failed the activation already).
      if (this.durable) await this.durable.catch(ignore);
      this.end();
      job.done();
      return;
    }
    // Its asker has given up: not applied.
    if (job.type === 'event' && job.expires !== Infinity && performance.now() > job.expires) return this.expire(job);
    if (!this.actor) await this.load();
    if (job.type === 'wake') return this.reindex(job.before);
    if (job.type === 'persist') {
      this.persistQueued = false;
      return this.afterCommit(this.commit());
    }
    const { envelope, respond } = job;
    const t0 = timings ? performance.now() : 0;
    if (timings) timings.add('actor.mailbox wait', t0 - job.at);
    const seen = this.applied.find(([id]) => id === envelope.eventId);
    if (seen) return this.answerAgain(seen[0], seen[1], respond);
    this.inEvent = true;
    let snapshot;
    try {
      this.actor!.send(envelope.event);
      snapshot = await this.settle();
    } finally {
      this.inEvent = false;
    }
    timings?.since('actor.xstate + effects', t0);
    // Failed while it settled: a commit queued before it was refused.
    if (this.ended) throw new HostFailure('STALE', 'the activation ended during the step', true);
    if (snapshot.status === 'error') {
      respond({ ok: false, code: 'ACTOR_ERROR', message: String(snapshot.error), retry: false });
      this.end();
      return;
    }
    // The reply is derived from the events this step commits (and committed with them, for retries).
    const reply = this.kind.reply ? this.kind.reply(snapshot, envelope.event, this.emitted?.slice() ?? []) : { value: snapshot.value, context: snapshot.context };
    const answer: Reply = { ok: true, reply };
    const durable = this.commit({ eventId: envelope.eventId, reply });
    // An ordered ask is answered once the commit is queued: whatever the asker commits next is queued behind it,
    // and the store makes batches durable in the order they were queued (`SnapshotStore.durableInOrder`).
    if (job.ordered) respond(answer);
    return this.afterCommit(durable, () => {
      respond(answer);
      timings?.since('actor.event', t0);
    }, respond);
  }

  /** Skips an event whose asker has given up (`Envelope.waitMs`); the answer reaches no one waiting. */
  private expire(job: Extract<Job, { type: 'event' }>): void {
    this.ctx.expired(this.kind.name);
    job.respond({ ok: false, code: 'EXPIRED', message: `${this.key}: the asker gave up before the event was applied`, retry: false });
  }

  /**
   * Answers a retry of an applied event with the answer its step gave, once that step is durable (a retry may
   * come while it is still being committed). The latest one's is in memory; any other is in the journal entry
   * of the version that applied it, read once the commits queued so far are durable.
   */
  private async answerAgain(eventId: string, version: number, respond: (r: Reply) => void): Promise<void> {
    if (eventId === this.lastEventId) {
      const again: Reply = { ok: true, reply: this.lastReply };
      if (this.durable === null) return respond(again);
      return this.afterCommit(this.durable, () => respond(again), respond);
    }
    // A commit that fails has failed the activation: the pump answers this retry with why.
    if (this.durable) await this.durable;
    const [entry] = await this.ctx.journal.ofActor(this.key, { afterVersion: version - 1, limit: 1 });
    if (entry?.version === version && 'reply' in entry) return respond({ ok: true, reply: entry.reply });
    // Not applied again: the event was applied, and its answer cannot be given.
    respond({ ok: false, code: 'STORE_ERROR', message: `the answer to event ${eventId} is not in the journal`, retry: false });
  }

  /**
   * What follows a queued commit: `then` once it is durable. Pipelined (see the class), the mailbox goes on at
   * once, and a commit that fails fails the activation, `respond` hearing why; else the job waits for it, and
   * the pump answers a failure.
   */
  private afterCommit(durable: Promise<void>, then?: () => void, respond?: (r: Reply) => void): Promise<void> | undefined {
    if (!this.ctx.snapshots.durableInOrder) return then ? durable.then(then) : durable;
    durable.then(then, (err) => this.failWith(err, respond));
    return undefined;
  }

  /** The snapshot once the kind calls it settled (effects of the event done), or as it is on error. */
  private settle(): Promise<any> {
    const actor = this.actor!;
    const settled = this.kind.settled;
    const now = actor.getSnapshot();
    if (!settled || settled(now) || now.status !== 'active') return Promise.resolve(now);
    return new Promise((resolve) => {
      const done = (s: any) => {
        sub.unsubscribe();
        if (this.effect) this.effect.failed = null;
        resolve(s);
      };
      const sub = actor.subscribe({
        next: (s: any) => {
          if (settled(s) || s.status !== 'active') done(s);
        },
        error: () => done(actor.getSnapshot()),
        // Stopped: the activation failed meanwhile (a pipelined commit was refused).
        complete: () => done(actor.getSnapshot()),
      });
      // As an invoked promise without `onError` would leave the actor: in error, which the step answers.
      if (this.kind.effect) (this.effect ??= { running: false, failed: null }).failed = (error) => done({ status: 'error', error });
    });
  }

  /** Runs the kind's effect if the snapshot asks for it and it is not running yet (`ActorKind.effect`). */
  private runEffect(snapshot: any): void {
    const effect = this.kind.effect;
    if (!effect || this.effect?.running || snapshot.status !== 'active' || !snapshot.hasTag(effect.tag)) return;
    const input = effect.input(snapshot.context);
    const actor = this.actor!;
    const state = (this.effect ??= { running: false, failed: null });
    state.running = true;
    let running: Promise<unknown>;
    try {
      running = effect.run(input);
    } catch (err) {
      running = Promise.reject(err);
    }
    running.then(
      (output) => {
        state.running = false;
        // Stopped meanwhile (passivated, failed, stale): the outcome has no actor to go to, as with an invoke.
        if (this.actor === actor) actor.send(effect.done(output));
      },
      (err) => {
        state.running = false;
        if (this.actor !== actor) return;
        if (effect.failed) return void actor.send(effect.failed(err));
        if (state.failed) return state.failed(err);
        // No step waits (a restored snapshot's effect): the actor fails; the next ask activates it afresh.
        this.ctx.log?.('an actor effect failed', { key: this.key, err: String(err) });
        this.fail(new HostFailure('ACTOR_ERROR', String(err), false));
      },
    );
  }

  private async load(): Promise<void> {
    if (this.ctx.fenceOf(this.shard) === null) throw new HostFailure('NOT_OWNER', 'this worker does not hold the shard', true);
    const stored = await this.ctx.snapshots.get(this.key);
    const { machine, input } = this.kind;
    let actor: AnyActorRef;
    if (stored) {
      const persisted = stored.data as PersistedActor;
      this.version = stored.version;
      this.indexed = stored.deadline;
      this.applied = persisted.a ?? [];
      actor = this.ctx.system.create(machine, { snapshot: persisted.s, input: input?.(this.id) });
    } else {
      this.version = 0;
      this.indexed = null;
      actor = this.ctx.system.create(machine, { input: input?.(this.id) });
    }
    // Registered before start: what an entry action emits belongs to the first commit too.
    actor.on('*', (event: { type: string } & Record<string, unknown>) => {
      if (!this.ended) (this.emitted ??= []).push(journalEvent(event));
    });
    actor.subscribe({
      next: (snapshot: any) => {
        // Also at `start`, which emits the restored snapshot: one stored while the kind's effect ran runs it again.
        this.runEffect(snapshot);
        // Changes inside an event are persisted by the event itself; later ones (timers, promises) here.
        if (this.inEvent || this.persistQueued || this.ended) return;
        this.persistQueued = true;
        this.push({ type: 'persist' });
      },
      error: ignore,
    });
    this.actor = actor;
    // Starting emits the current snapshot, which is already stored (or will be with the first event).
    this.inEvent = true;
    try {
      actor.start();
    } finally {
      this.inEvent = false;
    }
    this.armDeadline(this.kind.deadline?.of(actor.getSnapshot()) ?? null);
  }

  /**
   * Keeps a timer for the kind's deadline `at` (null: none). A later deadline leaves the armed timer alone (it
   * re-arms when it fires early), so a step that only pushes the deadline on costs no timer operation.
   */
  private armDeadline(at: number | null): void {
    if (at === null) {
      this.clearDeadline();
      return;
    }
    if (this.deadlineTimer !== null && this.deadlineAt !== null && this.deadlineAt <= at) {
      this.deadlineAt = at;
      return;
    }
    this.clearDeadline();
    this.deadlineAt = at;
    this.startDeadlineTimer(at);
  }

  private startDeadlineTimer(at: number): void {
    this.deadlineTimer = setTimeout(() => this.deadlinePassed(), Math.min(MAX_TIMER_STEP_MS, Math.max(0, at - Date.now())));
    this.deadlineTimer.unref?.();
  }

  private deadlinePassed(): void {
    this.deadlineTimer = null;
    const at = this.deadlineAt;
    if (this.ended || at === null) return;
    const now = Date.now();
    // Moved on since the timer was armed (or a timer fired a millisecond early): wait for what is left.
    if (now < at) return this.startDeadlineTimer(at);
    this.deadlineAt = null;
    const envelope: Envelope = { kind: this.kind.name, id: this.id, event: this.kind.deadline!.event(now), eventId: `deadline:${at}` };
    this.push({ type: 'event', envelope, respond: ignore, at: timings ? performance.now() : 0, ordered: false, expires: Infinity });
  }

  private clearDeadline(): void {
    if (this.deadlineTimer !== null) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
    this.deadlineAt = null;
  }

  /**
   * After a wake-up: an index entry that came due while no deadline of the actor does (the entry was kept as
   * steps moved the deadline later) is moved to the real deadline, with a step of no events, so that the
   * scheduler stops finding it. A deadline that is due is left to the timers that fire it.
   */
  private async reindex(before: number): Promise<void> {
    if (this.indexed === null || this.indexed > before) return;
    // While an effect that resumes at once runs, its entry is moved on `RESUME_AFTER_MS` (`current`): kept due,
    // the entries of many long ones would fill the scans (`WAKE_SCAN_LIMIT`) and hold back every timer behind them.
    const { due } = this.current();
    if (due !== null && due <= before) return;
    // The kept entry forgotten, the step indexes the actor under its real deadline.
    this.indexed = null;
    return this.afterCommit(this.commit());
  }

  /**
   * The actor now: its persisted form, its snapshot, the kind's deadline, and the earliest of all its deadlines
   * (while an effect that resumes at once runs, `RESUME_AFTER_MS` after the step: `KindEffect.resumeAtOnce`).
   */
  private current() {
    const persisted = persistedSnapshot(this.actor!);
    const snapshot = this.actor!.getSnapshot();
    const kindDeadline: number | null = this.kind.deadline?.of(snapshot) ?? null;
    const effect = this.kind.effect;
    const resuming = effect?.resumeAtOnce && snapshot.status === 'active' && snapshot.hasTag(effect.tag) ? Date.now() + RESUME_AFTER_MS : null;
    return { persisted, snapshot, kindDeadline, due: earlier(earlier(earliestDeadline(persisted), kindDeadline), resuming) };
  }

  /**
   * Queues the step's commit (the snapshot, its journal entry, the kind's records) and returns the promise that
   * it is durable and the kind told of it (`published`), which fails if the write is refused or the store
   * fails. From here on the actor is as the write leaves it: the next write expects its version. `answered`: the
   * event that began the step and its answer, remembered for retries and journaled with the step.
   */
  private commit(answered?: { eventId: string; reply: unknown }): Promise<void> {
    const fence = this.ctx.fenceOf(this.shard);
    if (fence === null) throw new HostFailure('NOT_OWNER', 'the shard lease lapsed', true);
    const t0 = timings ? performance.now() : 0;
    const version = this.version + 1;
    if (answered) this.remember(answered.eventId, version, answered.reply);
    const { persisted, snapshot, kindDeadline, due } = this.current();
    // Encoded by the store when it writes, which may be after the next step has run: `applied` is copied (its
    // pairs are never changed).
    const data: PersistedActor = { s: persisted, a: this.applied.slice(), ...(kindDeadline !== null ? { d: [this.kind.deadline!.name, kindDeadline] } : {}) };
    if (timings) timings.add('actor.snapshot persisted form', performance.now() - t0);
    const t1 = timings ? performance.now() : 0;
    // The records derived from this snapshot are written alongside it (not after it), tagged with its
    // version so that an older projection never overwrites a newer one.
    const projecting = this.kind.project && (!this.kind.settled || this.kind.settled(snapshot)) ? this.kind.project(snapshot, this.id, version) : null;
    // Waited for below, unless a commit before this one fails first.
    projecting?.catch(ignore);
    if (timings) timings.add('actor.project (call)', performance.now() - t1);
    const events = this.emitted ?? [];
    this.emitted = null;
    const step: JournalStep = answered ? { value: snapshot.value, events, reply: answered.reply } : { value: snapshot.value, events };
    const deadline = wakeIndexTime(this.indexed, due, Date.now(), this.ctx.wakeIndexRefreshMs);
    // The first write of an activation stands on the version it loaded; each later one on its own write before.
    const chained = this.writer !== 0;
    if (!chained) this.writer = newWriter();
    const committing = this.ctx.commit.put({
      key: this.key,
      data,
      expectedVersion: this.version,
      fence,
      shard: this.shard,
      deadline,
      step,
      writer: this.writer,
      chained,
    });
    committing.catch(ignore);
    this.version = version;
    this.indexed = deadline;
    this.armDeadline(kindDeadline);
    const t2 = timings ? performance.now() : 0;
    const before = this.durable;
    const durable = (before ? before.then(() => committing) : committing).then(async (result) => {
      if (!result.ok) {
        await projecting?.catch(ignore);
        // Someone else wrote this actor (a newer owner, or a second activation during a handover): this
        // instance is stale. Drop it; a retry activates it afresh from the stored snapshot.
        throw new HostFailure('STALE', `snapshot ${result.reason} conflict`, true);
      }
      timings?.since('actor.snapshot commit wait', t2);
      if (this.kind.published) this.publish(result.seq ?? 0, result.at ?? Date.now(), result.version, step);
      await projecting;
      timings?.since('actor.persist', t0);
    });
    this.durable = durable;
    const settled = () => {
      if (this.durable === durable) this.durable = null;
    };
    durable.then(settled, settled);
    return durable;
  }

  /** Tells the kind of a durable commit. Its failure is the publisher's, not the actor's: logged, not thrown. */
  private publish(seq: number, at: number, version: number, step: JournalStep): void {
    const entry: JournalEntry = { seq, key: this.key, kind: this.kind.name, id: this.id, shard: this.shard, version, at, value: step.value, events: step.events };
    if (step.reply !== undefined) entry.reply = step.reply;
    try {
      this.kind.published!(this.id, entry);
    } catch (err) {
      this.ctx.log?.('publishing a committed step failed', { key: this.key, version, err: String(err) });
    }
  }

  private remember(eventId: string, version: number, reply: unknown): void {
    this.applied.push([eventId, version]);
    if (this.applied.length > REMEMBERED_EVENTS) this.applied.shift();
    this.lastEventId = eventId;
    this.lastReply = reply;
  }
  /** Fails the activation with `err` (a store's error is retried: the step was not committed), `respond` hearing why. */
  private failWith(err: unknown, respond?: (r: Reply) => void): void {
    const failure = err instanceof HostFailure ? err : new HostFailure('STORE_ERROR', String(err), true);
    respond?.(failureReply(failure));
    this.fail(failure);
  }

  private fail(err: HostFailure): void {
    for (const job of this.queue?.splice(0) ?? []) {
      if (job.type === 'event') job.respond(failureReply(err));
      if (job.type === 'stop') job.done();
    }
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.clearDeadline();
    if (this.actor) this.ctx.system.stop(this.actor);
    this.actor = null;
    this.ctx.ended(this);
  }
}
