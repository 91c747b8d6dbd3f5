import type { AnyStateMachine, SnapshotFrom } from 'xstate';
import type { JournalEntry, JournalEvent } from '../store/mod.js';
import { counterMachine } from '../machines/counter.js';
import { sleepUntil } from './timers.js';

/**
 * An actor kind the host can activate: its machine (with the host's implementations provided), the input
 * a new actor starts from, and what an ask answers.
 */
export interface ActorKind<M extends AnyStateMachine = AnyStateMachine> {
  name: string;
  machine: M;
  /** Input of a new actor with this id. */
  input?: (id: string) => unknown;
  /**
   * The answer to an ask, from the snapshot after the event and the events the step emitted (committed with
   * that snapshot), so a machine needs no reply slot in its context. Defaults to `{value, context}`.
   */
  reply?: (snapshot: SnapshotFrom<M>, event: { type: string }, emitted: JournalEvent[]) => unknown;
  /**
   * Called with each committed step's journal entry once the commit is durable (in commit order per actor),
   * e.g. to publish the step's events to subscribers. Must not throw or block; it runs on the actor's path.
   */
  published?: (id: string, entry: JournalEntry) => void;
  /**
   * Whether the actor has finished reacting to an event. An ask waits (the mailbox holding later events)
   * until this holds, so that a turn whose effects are asynchronous answers with their outcome. Default:
   * settled right after the event.
   */
  settled?: (snapshot: SnapshotFrom<M>) => boolean;
  /**
   * Writes the records other interfaces read (e.g. the conversation record) from each snapshot of a settled
   * actor, alongside the snapshot's own write; `version` is the snapshot version being written. Must be
   * idempotent and must not let a lower version overwrite a higher one: it may run again for the same
   * snapshot after a failover, and a stale activation may run it before its own write is refused.
   */
  project?: (snapshot: SnapshotFrom<M>, id: string, version: number) => Promise<void>;
  /**
   * A deadline the host keeps for the actor, instead of a durable timer the machine invokes (a child actor
   * stopped and started again on every step that moves it). After each step the host reads it from the
   * snapshot (`of`; null: none); once it passes, the host sends `event(at)` through the mailbox as one durable
   * step like any other, and the machine decides (its guards see `at`). It is stored with the snapshot as a
   * timer's deadline is, so a passivated actor is woken for it, and the inspector lists it under `name`.
   */
  deadline?: KindDeadline<M>;
  /**
   * An effect the host runs for the actor, instead of an actor the machine invokes (a child actor created
   * and stopped on every step that needs one). Whenever a snapshot carries the effect's `tag` and the effect is
   * not already running, the host runs it with `input(context)` and sends `done(output)` to the actor, as an invoked
   * promise's done event would come; the step waits for it as for any effect (`settled`). If it rejects, the
   * host sends `failed(error)` as an invoke's `onError` would hear it, or, without `failed`, the actor fails as
   * with an invoke that has no `onError`: the ask waiting on the step is answered `ACTOR_ERROR` and the
   * activation ends. A snapshot restored in such a state runs it again, as a restored invoke is restarted.
   * The host does not cancel a running effect: the machine leaves the state that asks for it only on its
   * outcome (or by ending), and an outcome that comes when no state asks for it any more changes nothing.
   */
  effect?: KindEffect<M>;
}

/** See `ActorKind.effect`. */
export interface KindEffect<M extends AnyStateMachine = AnyStateMachine, I = any, O = any> {
  /** The state tag that asks for the effect (the machine's states that wait for its outcome carry it). */
  tag: string;
  /** What it runs with, from the context of a snapshot carrying `tag`. */
  input: (context: SnapshotFrom<M>['context']) => I;
  run: (input: I) => Promise<O>;
  done: (output: O) => { type: string } & Record<string, unknown>;
  failed?: (error: unknown) => { type: string } & Record<string, unknown>;
  /**
   * Whether a snapshot stored while the effect runs is indexed to be woken soon after (5 s), so that when its
   * owner dies a new owner restores it (and runs the effect again) by itself. Without it that happens only when
   * the next event or timer comes: enough for a kind whose effects each have an asker that retries (a Chat API
   * turn), not for one whose outcome goes to subscribers nobody asks for (a messaging session's reply, sent to
   * sockets).
   * It costs a move of the actor's wake-up entry into the effect and one out of it.
   */
  resumeAtOnce?: boolean;
}

/** See `ActorKind.deadline`. */
export interface KindDeadline<M extends AnyStateMachine = AnyStateMachine> {
  name: string;
  of: (snapshot: SnapshotFrom<M>) => number | null;
  event: (at: number) => { type: string } & Record<string, unknown>;
}

/**
 * The idle expiry the conversation and session kinds share: while a snapshot carries the tag `expires`, the
 * deadline is its context's `idleDeadline`, and the host sends `IDLE_TIMEOUT` when it passes (each machine's
 * guard checks that the deadline has not moved on since).
 */
export const IDLE_EXPIRY: KindDeadline = {
  name: 'idleTimer',
  of: (s) => (s.hasTag('expires') ? (s.context as { idleDeadline: number | null }).idleDeadline : null),
  event: (at) => ({ type: 'IDLE_TIMEOUT', at }),
};

/** The kinds every worker hosts (`extra` adds those that need the platform's services). */
export function builtinKinds(extra: ActorKind[] = []): Map<string, ActorKind> {
  const counter: ActorKind = {
    name: 'counter',
    machine: counterMachine.provide({ actors: { sleepUntil } }),
    reply: (s) => ({ value: s.value, ...(s.context as object) }),
  };
  return new Map([counter, ...extra].map((k) => [k.name, k]));
}
