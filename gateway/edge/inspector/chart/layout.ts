import ELKModule from 'elkjs/lib/elk.bundled.js';
import type { ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';
import type { Chart, ChartState, ChartTransition } from './graph.js';

/**
 * Lays a statechart out with ELK's layered algorithm (elkjs, pure JavaScript, no browser): states are
 * nested nodes sized from their text, transitions are edges with their label, an initial state gets a small
 * pseudo-node with an edge into it. Every coordinate comes back absolute (ELK's `ROOT` coordinate mode), so
 * the SVG renderer needs no offsets.
 */

/** Character width and line height the sizes are estimated with (12 px sans-serif). */
export const CHAR_W = 7;
export const LINE_H = 15;
const TITLE_H = 24;
const PAD = 10;
const INIT_SIZE = 12;

/** The lines written inside a state under its name: invoked effects and timers, the host's effect, tags. */
export function stateLines(s: ChartState): Array<{ text: string; cls: string }> {
  const lines: Array<{ text: string; cls: string }> = [];
  for (const i of s.invokes) {
    lines.push(i.timer ? { text: `timer ${i.id} (${i.src})`, cls: 'timer' } : { text: `invoke ${i.id}: ${i.src}`, cls: 'invoke' });
  }
  if (s.hostEffect) lines.push({ text: `host effect: ${s.hostEffect}`, cls: 'invoke' });
  if (s.tags.length) lines.push({ text: `tags: ${s.tags.join(', ')}`, cls: 'tags' });
  return lines;
}

/** The text of a transition's label: `EVENT [guard]`, `(stays)` for a targetless one. */
export function transitionText(t: ChartTransition): string {
  return `${t.label}${t.guard ? ` [${t.guard}]` : ''}${t.actions.length ? ` / ${t.actions.join(', ')}` : ''}`;
}

const width = (texts: string[], bold: string) => Math.max(bold.length * (CHAR_W + 0.6), ...texts.map((x) => x.length * CHAR_W)) + 2 * PAD;

/** Transitions that stay in their state (no target): listed inside it instead of drawn as arrows. */
export const internalOf = (chart: Chart, s: ChartState) => chart.transitions.filter((t) => t.source === s.id && t.targets.length === 0);

export interface Laid {
  graph: ElkNode;
  /** The chart's states by id (the ELK node ids). */
  states: Map<string, ChartState>;
  transitions: Map<string, ChartTransition>;
}

export async function layoutChart(chart: Chart): Promise<Laid> {
  const states = new Map<string, ChartState>();
  const edges: ElkExtendedEdge[] = [];
  const transitions = new Map<string, ChartTransition>();
  const node = (s: ChartState): ElkNode => {
    states.set(s.id, s);
    const lines = [...stateLines(s).map((l) => l.text), ...internalOf(chart, s).map((t) => transitionText(t))];
    const headH = TITLE_H + lines.length * LINE_H;
    const w = width(lines, s.key);
    if (s.children.length === 0) return { id: s.id, width: Math.max(w, 90), height: headH + PAD };
    const children = s.children.map((c) => node(c));
    if (s.initial) {
      const init = `${s.id}#initial`;
      children.push({ id: init, width: INIT_SIZE, height: INIT_SIZE });
      edges.push({ id: `${init}->`, sources: [init], targets: [s.initial] });
    }
    return {
      id: s.id,
      children,
      layoutOptions: {
        'elk.padding': `[top=${headH + 4},left=${PAD + 6},bottom=${PAD + 6},right=${PAD + 6}]`,
        'elk.nodeSize.constraints': 'MINIMUM_SIZE',
        'elk.nodeSize.minimum': `(${w}, ${headH + 20})`,
        // Regions of a parallel state side by side; states of a compound one by layered flow.
        ...(s.type === 'parallel' ? { 'elk.algorithm': 'layered', 'elk.direction': 'RIGHT' } : {}),
      },
    };
  };
  const rootNode = node(chart.root);
  for (const t of chart.transitions) {
    transitions.set(t.id, t);
    t.targets.forEach((target, n) => {
      const text = transitionText(t);
      edges.push({
        id: `${t.id}>${n}`,
        sources: [t.source],
        targets: [target],
        labels: [{ id: `${t.id}>${n}#label`, text, width: text.length * CHAR_W + 8, height: LINE_H + 2 }],
      });
    });
  }
  const graph: ElkNode = {
    id: '#chart',
    children: [rootNode],
    edges,
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': 'DOWN',
      'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
      'elk.json.shapeCoords': 'ROOT',
      'elk.json.edgeCoords': 'ROOT',
      'elk.layered.spacing.nodeNodeBetweenLayers': '46',
      'elk.spacing.nodeNode': '30',
      'elk.spacing.edgeLabel': '4',
      'elk.spacing.edgeEdge': '12',
      'elk.layered.spacing.edgeNodeBetweenLayers': '16',
      'elk.edgeLabels.inline': 'false',
      'elk.layered.nodePlacement.strategy': 'NETWORK_SIMPLEX',
      'elk.padding': '[top=12,left=12,bottom=12,right=12]',
    },
  };
  const ELK = ELKModule as unknown as new () => { layout(g: ElkNode): Promise<ElkNode> };
  const laid = await new ELK().layout(graph);
  return { graph: laid, states, transitions };
}
