import type { AnyStateMachine, SnapshotFrom } from 'xstate';
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
  /** The answer to an ask, from the snapshot after the event. Defaults to `{value, context}`. */
  reply?: (snapshot: SnapshotFrom<M>, event: { type: string }) => unknown;
}

/** The kinds every worker hosts. Later issues add conversation, session, call and alert rule. */
export function builtinKinds(): Map<string, ActorKind> {
  const counter: ActorKind = {
    name: 'counter',
    machine: counterMachine.provide({ actors: { sleepUntil } }),
    reply: (s) => ({ value: s.value, ...(s.context as object) }),
  };
  return new Map([[counter.name, counter]]);
}
