import type { ElkEdgeSection, ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';
import type { AnyStateMachine } from 'xstate';
import { chartOf, type ChartState } from './graph.js';
import { CHAR_W, internalOf, layoutChart, LINE_H, stateLines, transitionText, type Laid } from './layout.js';

/**
 * Renders a laid-out statechart as a standalone SVG document (no script, no external reference). Each state
 * is a `<g class="state" data-path="agent.ready">` and each transition a `<g class="transition"
 * data-transition="<id>" data-event="<type>">`, so a page can light the active states (class `active`) and
 * the last transition taken (class `taken`); the styles for both are inside the SVG.
 */

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const n = (x: number) => Math.round(x * 10) / 10;

const STYLE = `
.chart{font:12px 'DejaVu Sans',Verdana,sans-serif;fill:#1d2330}
.state>rect{fill:#fff;stroke:#5b6578;stroke-width:1.2}
.state.compound>rect{fill:#f6f8fb}
.state.region>rect{fill:#fbfcfe;stroke-dasharray:6 4}
.state.final>rect.inner{fill:none;stroke:#5b6578}
.state.root>rect{fill:#fff;stroke:#c5ccd8}
.state .name{font-weight:bold}
.state .timer{fill:#8a4b00}
.state .invoke{fill:#245a9e}
.state .tags{fill:#6b7385;font-style:italic}
.state .internal{fill:#4b5365}
.state.active>rect{fill:#fff4cc;stroke:#d08a00;stroke-width:2.6}
.state.active.compound>rect,.state.active.parallel>rect,.state.active.region>rect{fill:#fffbeb}
.state.active>.name{fill:#7a4a00}
.transition path{fill:none;stroke:#7d8799;stroke-width:1.2}
.transition text{fill:#3b4356;font-size:11px}
.transition rect{fill:#fff;opacity:.85}
.transition.taken path{stroke:#d08a00;stroke-width:2.4}
.transition.taken text{fill:#7a4a00;font-weight:bold}
.initial{fill:#1d2330}
.initial-edge{fill:none;stroke:#1d2330;stroke-width:1.2}
`;

function points(s: ElkEdgeSection): string {
  return [s.startPoint, ...(s.bendPoints ?? []), s.endPoint].map((p) => `${n(p.x)},${n(p.y)}`).join(' L');
}

/** The SVG of a laid-out chart. */
export function renderSvg(laid: Laid, title: string): string {
  const out: string[] = [];
  const g = laid.graph;
  const W = Math.ceil(g.width ?? 100);
  const H = Math.ceil(g.height ?? 100);
  const parentType = new Map<string, string>();
  for (const s of laid.states.values()) for (const c of s.children) parentType.set(c.id, s.type);
  const chartRoot = laid.graph.children![0];
  const drawNode = (node: ElkNode) => {
    if (node.id.endsWith('#initial')) {
      out.push(`<circle class="initial" cx="${n(node.x! + node.width! / 2)}" cy="${n(node.y! + node.height! / 2)}" r="${n(node.width! / 2)}"/>`);
      return;
    }
    const s = laid.states.get(node.id)!;
    const isRoot = node === chartRoot;
    const classes = ['state', s.type, ...(isRoot ? ['root'] : []), ...(parentType.get(s.id) === 'parallel' ? ['region'] : [])];
    out.push(`<g class="${classes.join(' ')}" data-path="${esc(s.path.join('.'))}" data-id="${esc(s.id)}">`);
    out.push(`<rect x="${n(node.x!)}" y="${n(node.y!)}" width="${n(node.width!)}" height="${n(node.height!)}" rx="8"/>`);
    if (s.type === 'final') out.push(`<rect class="inner" x="${n(node.x! + 3)}" y="${n(node.y! + 3)}" width="${n(node.width! - 6)}" height="${n(node.height! - 6)}" rx="6"/>`);
    const x = node.x! + 10;
    let y = node.y! + 17;
    out.push(`<text class="name" x="${n(x)}" y="${n(y)}">${esc(isRoot ? `${s.key} (machine)` : s.key)}</text>`);
    for (const l of stateLines(s)) {
      y += LINE_H;
      out.push(`<text class="${l.cls}" x="${n(x)}" y="${n(y)}">${esc(l.text)}</text>`);
    }
    for (const t of internalOf({ id: '', root: s, transitions: [...laid.transitions.values()] }, s)) {
      y += LINE_H;
      out.push(`<g class="transition internal" data-transition="${esc(t.id)}" data-event="${esc(t.event)}"><text class="internal" x="${n(x)}" y="${n(y)}">${esc(transitionText(t))}</text></g>`);
    }
    out.push('</g>');
    for (const c of node.children ?? []) drawNode(c);
  };
  const drawEdge = (e: ElkExtendedEdge) => {
    const sections = e.sections ?? [];
    if (e.id.endsWith('#initial->')) {
      for (const s of sections) out.push(`<path class="initial-edge" d="M${points(s)}" marker-end="url(#arrow)"/>`);
      return;
    }
    const tid = e.id.slice(0, e.id.lastIndexOf('>'));
    const t = laid.transitions.get(tid)!;
    const path = (id: string) => esc(laid.states.get(id)?.path.join('.') ?? '');
    out.push(`<g class="transition" data-transition="${esc(t.id)}" data-event="${esc(t.event)}" data-source="${path(t.source)}" data-targets="${t.targets.map(path).join(' ')}">`);
    for (const s of sections) out.push(`<path d="M${points(s)}" marker-end="url(#arrow)"/>`);
    for (const l of e.labels ?? []) {
      out.push(`<rect x="${n(l.x!)}" y="${n(l.y!)}" width="${n(l.width!)}" height="${n(l.height!)}" rx="3"/>`);
      out.push(`<text x="${n(l.x! + 4)}" y="${n(l.y! + LINE_H - 3)}">${esc(l.text ?? '')}</text>`);
    }
    out.push('</g>');
  };
  out.push(`<?xml version="1.0" encoding="UTF-8"?>`);
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">`);
  out.push(`<title>${esc(title)}</title>`);
  out.push(`<defs><style>${STYLE}</style><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#5b6578"/></marker></defs>`);
  out.push(`<rect width="${W}" height="${H}" fill="#fff"/>`);
  drawNode(chartRoot);
  for (const e of g.edges ?? []) drawEdge(e);
  out.push('</svg>');
  void CHAR_W;
  return `${out.join('\n')}\n`;
}

/** The statechart of a machine as an SVG document. */
export async function machineSvg(machine: AnyStateMachine, title = `${machine.id} statechart`): Promise<string> {
  return renderSvg(await layoutChart(chartOf(machine)), title);
}
