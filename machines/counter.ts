import { assign, emit, fromPromise, setup } from 'xstate';

/**
 * A diagnostic actor kind for the runtime's own tests and benchmarks: a strictly sequential counter with a
 * durable timer. `INC` adds one and answers the new count, so a client that sees 1, 2, 3, ... knows that no
 * acknowledged event was lost or applied twice. `ARM` arms a timer for an absolute time; when it fires the
 * counter records when. Each `INC` emits `counter.incremented` with the new count (a domain event the host
 * journals with the step).
 */
export interface CounterContext {
  count: number;
  /** Deadline of the armed timer (ms since epoch), or null. */
  deadline: number | null;
  /** When the last timer fired, or null. */
  firedAt: number | null;
  fired: number;
}

export type CounterEvent = { type: 'INC' } | { type: 'GET' } | { type: 'ARM'; at: number } | { type: 'DISARM' };

/** What the counter emits. */
export type CounterEmitted = { type: 'counter.incremented'; data: { count: number } };

/** The timer: an invoked actor whose input is an absolute deadline, so a persisted snapshot carries it. */
export interface SleepInput {
  until: number;
}

export const counterMachine = setup({
  types: {} as { context: CounterContext; events: CounterEvent; emitted: CounterEmitted },
  actors: {
    // Provided by the actor host (actors/timers.ts); a machine does no I/O of its own.
    sleepUntil: fromPromise<number, SleepInput>(async () => {
      throw new Error('sleepUntil is provided by the actor host');
    }),
  },
  actions: {
    increment: assign({ count: ({ context }) => context.count + 1 }),
    announce: emit(({ context }) => ({ type: 'counter.incremented' as const, data: { count: context.count } })),
  },
}).createMachine({
  id: 'counter',
  context: { count: 0, deadline: null, firedAt: null, fired: 0 },
  initial: 'idle',
  on: { INC: { actions: ['increment', 'announce'] } },
  states: {
    idle: {
      on: { ARM: { target: 'armed', actions: assign({ deadline: ({ event }) => event.at }) } },
    },
    armed: {
      invoke: {
        id: 'timer',
        src: 'sleepUntil',
        input: ({ context }) => ({ until: context.deadline! }),
        onDone: {
          target: 'idle',
          actions: assign({ firedAt: ({ event }) => event.output, fired: ({ context }) => context.fired + 1, deadline: null }),
        },
      },
      on: {
        ARM: { target: 'armed', reenter: true, actions: assign({ deadline: ({ event }) => event.at }) },
        DISARM: { target: 'idle', actions: assign({ deadline: null }) },
      },
    },
  },
});
