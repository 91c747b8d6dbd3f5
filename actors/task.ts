import type { AnyActorRef, PromiseActorLogic } from 'xstate';

/** A started piece of asynchronous work, and how to cancel it when its actor stops first. */
export interface Task<T> {
  done: PromiseLike<T>;
  cancel?: () => void;
}

// XState's own event types for promise actors: snapshots and transitions stay those of `fromPromise`.
const RESOLVE = 'xstate.promise.resolve';
const REJECT = 'xstate.promise.reject';
const STOP = 'xstate.stop';

/**
 * XState's `fromPromise` without an `AbortController` per run. `fromPromise` makes one every time it starts
 * and aborts it when stopped before settling, and each abort builds a `DOMException` (stack trace
 * included): a measurable share of a chat turn, which stops the idle timer and starts the turn effect every
 * time. Here a task says how to cancel itself, if it can. The snapshot (`status`, `output`, `error`, `input`)
 * and the events are `fromPromise`'s, so persisted snapshots of either restore with the other.
 */
export function fromTask<TOutput, TInput>(run: (input: TInput) => Task<TOutput>): PromiseActorLogic<TOutput, TInput> {
  const cancels = new WeakMap<AnyActorRef, () => void>();
  const logic: PromiseActorLogic<TOutput, TInput> = {
    config: run,
    transition: (state, event, scope) => {
      if (state.status !== 'active') return state;
      switch (event.type) {
        case RESOLVE:
          return { ...state, status: 'done', output: event.data as TOutput, input: undefined };
        case REJECT:
          return { ...state, status: 'error', error: event.data, input: undefined };
        case STOP:
          cancels.get(scope.self)?.();
          cancels.delete(scope.self);
          return { ...state, status: 'stopped', input: undefined };
        default:
          return state;
      }
    },
    start: (state, { self }) => {
      if (state.status !== 'active') return;
      let task: Task<TOutput>;
      try {
        task = run(state.input as TInput);
      } catch (err) {
        task = { done: Promise.reject(err) };
      }
      if (task.cancel) cancels.set(self, task.cancel);
      Promise.resolve(task.done).then(
        (data) => {
          if (self.getSnapshot().status !== 'active') return;
          cancels.delete(self);
          self.send({ type: RESOLVE, data });
        },
        (data) => {
          if (self.getSnapshot().status !== 'active') return;
          cancels.delete(self);
          self.send({ type: REJECT, data });
        },
      );
    },
    getInitialSnapshot: (_, input) => ({ status: 'active', output: undefined, error: undefined, input }),
    getPersistedSnapshot: (snapshot) => snapshot,
    restoreSnapshot: (snapshot) => snapshot as never,
  };
  return logic;
}

/** `fromTask` for work that cannot be cancelled: an async function of the input. */
export function fromEffect<TOutput, TInput>(effect: (input: TInput) => Promise<TOutput>): PromiseActorLogic<TOutput, TInput> {
  return fromTask((input: TInput) => ({ done: effect(input) }));
}
