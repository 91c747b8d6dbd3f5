import type { AnyStateMachine } from 'xstate';
import { MACHINES } from '../../../machines/catalog.js';
import { chartOf, statesOf } from './chart/graph.js';
import { machineSvg } from './chart/svg.js';

/**
 * The drawable machines of `machines/catalog.ts`, each rendered once per process (a definition does not
 * change while it runs) and kept.
 */
const rendered = new Map<string, Promise<string>>();

export interface MachineSummary {
  kind: string;
  /** The machine's id (its root state's id). */
  machine: string;
  states: number;
  transitions: number;
  timers: number;
  effects: number;
  svg: string;
}

export const machineOf = (kind: string): AnyStateMachine | undefined => (Object.hasOwn(MACHINES, kind) ? MACHINES[kind] : undefined);

export function summaries(): MachineSummary[] {
  return Object.keys(MACHINES)
    .sort()
    .map((kind) => {
      const chart = chartOf(MACHINES[kind]);
      const states = statesOf(chart);
      const invokes = states.flatMap((s) => s.invokes);
      return {
        kind,
        machine: chart.id,
        states: states.length - 1,
        transitions: chart.transitions.length,
        timers: invokes.filter((i) => i.timer).length,
        effects: invokes.filter((i) => !i.timer).length + states.filter((s) => s.hostEffect).length,
        svg: `/admin/v1/inspector/machines/${kind}.svg`,
      };
    });
}

/** The SVG statechart of a kind of the catalog (undefined for an unknown kind). */
export function svgOf(kind: string): Promise<string> | undefined {
  const machine = machineOf(kind);
  if (!machine) return undefined;
  let svg = rendered.get(kind);
  if (!svg) {
    svg = machineSvg(machine, `${kind} statechart`);
    rendered.set(kind, svg);
    svg.catch(() => rendered.delete(kind));
  }
  return svg;
}

/** Renders every machine of the catalog: `[kind, svg]`, sorted by kind (`switchboard charts`). */
export async function renderAll(): Promise<Array<[string, string]>> {
  const out: Array<[string, string]> = [];
  for (const kind of Object.keys(MACHINES).sort()) out.push([kind, await svgOf(kind)!]);
  return out;
}
