import type { AnyStateMachine } from 'xstate';

/**
 * A machine definition read as a statechart: its state tree (compound, parallel, final states, initial
 * states, invoked effects and durable timers) and every transition with its event and named guard. Read
 * from the machine object alone (`machine.root`), so any XState 5 machine can be drawn and covered without
 * running it. Transition ids are stable for a given definition; the path-coverage test and the page use them.
 */

/** The effect an actor host provides for durable timers (`actors/timers.ts`): invoked with an absolute deadline. */
export const TIMER_SRC = 'sleepUntil';

export type StateType = 'atomic' | 'compound' | 'parallel' | 'final' | 'history';

export interface ChartInvoke {
  /** The invocation's id (the child actor's id; `xstate.done.actor.<id>` is its completion event). */
  id: string;
  /** The named effect (`setup({actors})` key), or `inline` for an actor given by value. */
  src: string;
  /** A durable timer: `sleepUntil` with an absolute deadline. */
  timer: boolean;
}

export interface ChartTransition {
  /** `<source state id>:<event type>:<n>` (n: its place among the source's candidates for that event). */
  id: string;
  source: string;
  /** Target state ids; empty for a targetless transition (actions only, the state stays). */
  targets: string[];
  /** The event type as XState knows it (`''` for an eventless `always` transition). */
  event: string;
  /** The event as a reader says it: `done: start`, `error: turn`, `always`, `MESSAGE`. */
  label: string;
  /** The named guard (`inline` for a guard given as a function), or null. */
  guard: string | null;
  /** Named actions (XState's built-ins such as `xstate.assign` left out). */
  actions: string[];
  reenter: boolean;
}

export interface ChartState {
  /** XState's state node id, e.g. `session.agent.ready`. */
  id: string;
  key: string;
  /** Path from the root, e.g. `['agent', 'ready']`: how state values name it. */
  path: string[];
  type: StateType;
  /** Id of the initial child (compound states). */
  initial: string | null;
  invokes: ChartInvoke[];
  /** The effect the actor host runs while in this state (`ActorKind.effect`), as its `meta.hostEffect` names it. */
  hostEffect: string | null;
  tags: string[];
  children: ChartState[];
}

export interface Chart {
  /** The machine's id. */
  id: string;
  root: ChartState;
  transitions: ChartTransition[];
}

const guardName = (guard: unknown): string | null => {
  if (guard === undefined || guard === null) return null;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object' && typeof (guard as { type?: unknown }).type === 'string') return (guard as { type: string }).type;
  // A guard written inline: XState names its wrapper `guard`; there is no name to show.
  return 'inline';
};

const actionNames = (actions: readonly unknown[]): string[] =>
  actions
    .map((a) => (typeof a === 'string' ? a : typeof a === 'object' && a && typeof (a as { type?: unknown }).type === 'string' ? (a as { type: string }).type : null))
    .filter((a): a is string => a !== null && !a.startsWith('xstate.'));

/** How an event type reads on a chart. */
export function eventLabel(event: string): string {
  if (event === '') return 'always';
  if (event.startsWith('xstate.done.actor.')) return `done: ${event.slice('xstate.done.actor.'.length)}`;
  if (event.startsWith('xstate.error.actor.')) return `error: ${event.slice('xstate.error.actor.'.length)}`;
  if (event.startsWith('xstate.done.state.')) return `done: ${event.slice('xstate.done.state.'.length).split('.').pop()}`;
  if (event.startsWith('xstate.after.')) return `after ${event.slice('xstate.after.'.length).split('.')[0]} ms`;
  return event;
}

/** The statechart of a machine definition. */
export function chartOf(machine: AnyStateMachine): Chart {
  const transitions: ChartTransition[] = [];
  const visit = (node: any): ChartState => {
    const candidates: Array<[string, any[]]> = [...(node.transitions as Map<string, any[]>).entries()];
    if (node.always?.length) candidates.push(['', node.always]);
    for (const [event, list] of candidates) {
      list.forEach((t, n) => {
        transitions.push({
          id: `${node.id}:${event}:${n}`,
          source: node.id,
          targets: (t.target ?? []).map((s: any) => s.id),
          event,
          label: eventLabel(event),
          guard: guardName(t.guard),
          actions: actionNames(t.actions ?? []),
          reenter: !!t.reenter,
        });
      });
    }
    const children = Object.values(node.states ?? {}).map(visit);
    return {
      id: node.id,
      key: node.key,
      path: node.path,
      type: node.type,
      initial: node.type === 'compound' ? (node.initial?.target?.[0]?.id ?? null) : null,
      invokes: (node.invoke ?? []).map((i: any) => {
        const src = typeof i.src === 'string' ? i.src : 'inline';
        return { id: i.id, src, timer: src === TIMER_SRC };
      }),
      hostEffect: typeof node.meta?.hostEffect === 'string' ? node.meta.hostEffect : null,
      tags: [...(node.tags ?? [])],
      children,
    };
  };
  const root = visit(machine.root);
  return { id: machine.id, root, transitions };
}

/** Every state of a chart, the root first. */
export function statesOf(chart: Chart): ChartState[] {
  const out: ChartState[] = [];
  const walk = (s: ChartState) => {
    out.push(s);
    s.children.forEach(walk);
  };
  walk(chart.root);
  return out;
}

/**
 * The state paths a state value makes active, dot-joined (`'idle'` → `''` (the root), `idle`; `{agent:
 * 'ready'}` → `''`, `agent`, `agent.ready`), for lighting them on a chart (states carry `data-path`).
 */
export function activePaths(value: unknown): string[] {
  const out = [''];
  const walk = (prefix: string, v: unknown) => {
    const at = (k: string) => (prefix ? `${prefix}.${k}` : k);
    if (typeof v === 'string') out.push(at(v));
    else if (v && typeof v === 'object') {
      for (const [k, sub] of Object.entries(v)) {
        out.push(at(k));
        walk(at(k), sub);
      }
    }
  };
  walk('', value);
  return out;
}
