import { createActor, fromPromise, type AnyStateMachine } from 'xstate';
import { getShortestPaths } from 'xstate/graph';
import { chartOf } from '../../gateway/edge/inspector/chart/graph.js';

/**
 * Path coverage of a machine's transitions. `getShortestPaths` (xstate/graph) finds a shortest path to every
 * state the sample events reach (states told apart by `serializeState`); each path is replayed on a real
 * actor, then every sample event is tried from where it ends. XState's inspection API reports each
 * microstep's transitions, so a transition counts as covered only when a real actor took it. Effects are
 * replaced by promises that never settle: samples drive them with their `xstate.done.actor.<id>` events.
 */
export interface MachineSample {
  /** The events tried from every reachable state (effects' completions included). */
  events: Array<{ type: string } & Record<string, unknown>>;
  /** Which snapshots count as different states (default: the state value and the whole context). */
  serializeState?: (snapshot: any) => string;
  /** The machine's input. */
  input?: unknown;
  /** Several inputs, each explored in turn (a transition only some inputs reach, e.g. a schedule's first delay). */
  inputs?: unknown[];
}

export interface Coverage {
  total: number;
  covered: string[];
  missing: string[];
  /** Paths replayed (one per reachable state). */
  paths: number;
}

const never = () => new Promise<never>(() => undefined);

/** The machine with every named effect replaced by a promise that never settles. */
export function inert(machine: AnyStateMachine): AnyStateMachine {
  const actors = Object.fromEntries(Object.keys(machine.implementations.actors ?? {}).map((k) => [k, fromPromise(never)]));
  return machine.provide({ actors });
}

/** The chart id (`<source id>:<event>:<n>`) of a transition definition XState took. */
const idOf = (t: any): string => {
  const source = t.source;
  const list: any[] = t.eventType === '' || !source.transitions.has(t.eventType) ? (source.always ?? []) : source.transitions.get(t.eventType);
  const event = list === source.always ? '' : t.eventType;
  return `${source.id}:${event}:${list.indexOf(t)}`;
};

export function transitionCoverage(machine: AnyStateMachine, sample: MachineSample): Coverage {
  const m = inert(machine);
  const all = chartOf(machine).transitions.map((t) => t.id);
  const covered = new Set<string>();
  const inspect = (e: any) => {
    if (e.type === '@xstate.microstep') for (const t of e._transitions ?? []) covered.add(idOf(t));
  };
  let replayed = 0;
  for (const input of sample.inputs ?? [sample.input]) {
    const paths = getShortestPaths(m, { events: sample.events, serializeState: sample.serializeState ?? ((s: any) => JSON.stringify([s.value, s.context])), input } as any);
    replayed += paths.length;
    for (const path of paths) {
      for (const event of [null, ...sample.events]) {
        const actor = createActor(m, { input, inspect } as any);
        // An effect's error event where no state handles it stops the actor with that error: not a test failure.
        actor.subscribe({ error: () => undefined });
        actor.start();
        for (const step of path.steps) actor.send(step.event as any);
        if (event) actor.send(event as any);
        actor.stop();
      }
    }
  }
  return { total: all.length, covered: all.filter((id) => covered.has(id)), missing: all.filter((id) => !covered.has(id)), paths: replayed };
}
