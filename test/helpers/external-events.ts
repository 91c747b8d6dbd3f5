import type { ChatProject } from './chat.js';
import { toQuery } from './conversations.js';
import { http, type Res } from './http.js';
import type { Platform } from './platform.js';
import { admin } from './tenants.js';

/**
 * Project functions for the external-event tests: `turn` waits on `wait:<id>[:<timeout_ms>]` (and busy-loops 4 s
 * on `slow`); `external_event` records each event in `conv.state.events`, says so, and ends (`action: end`) or
 * waits again (`action: again`); `bridge_ended` counts its runs and keeps the durations.
 */
export const FUNCTIONS: Record<string, string> = {
  turn: `function turn(conv, message) {
    const m = /^wait:([^:]+)(?::(\\d+))?$/.exec(message);
    if (m) {
      conv.await_external_event(m[1], m[2] ? { timeout_ms: Number(m[2]) } : undefined);
      return 'Waiting for ' + m[1];
    }
    if (message === 'slow') { const until = Date.now() + 4000; while (Date.now() < until) {} return 'slow done'; }
    return undefined;
  }`,
  external_event: `function external_event(conv, event) {
    conv.state.events = (conv.state.events || []).concat([{ id: event.id, timed_out: event.timed_out, content_type: event.content_type, body: event.body, data: event.data }]);
    if (event.timed_out) { conv.say('No answer for ' + event.id); return; }
    const action = event.data && typeof event.data === 'object' ? event.data.action : undefined;
    if (action === 'end') { conv.say('Payment received, goodbye'); conv.end(); return; }
    if (action === 'handoff') { conv.say('Passing you to a person'); conv.handoff('desk', 'payment query'); return; }
    if (action === 'again') { conv.await_external_event(event.id + '-2'); }
    conv.say('Event ' + event.id + ' arrived');
  }`,
  bridge_ended: `function bridge_ended(conv, bridge) {
    conv.state.bridge_runs = (conv.state.bridge_runs || 0) + 1;
    conv.state.bridge_seen = bridge.bridge_duration_seconds + '/' + bridge.call_duration_seconds;
  }`,
};

/** An `external_events` key for the project. */
export async function externalKey(p: Platform, c: ChatProject): Promise<string> {
  const r = await admin(p)('POST', '/keys', { account_id: c.accountId, scope: 'external_events', project_id: c.agentId });
  if (r.status !== 201) throw new Error(`key: ${r.status} ${r.text}`);
  return r.body.key;
}

export type Hook = { query?: Record<string, string | string[]>; raw?: string; type?: string | null; headers?: Record<string, string>; key?: string | null; project?: ChatProject };

/** `POST /v1/external-events/webhook` for a project (default: `c`), payload location unless the query says otherwise. */
export function webhook(base: string, proj: ChatProject, k: string | null, h: Hook = {}): Promise<Res<any>> {
  const query = { event_id_location: 'payload', event_id_path: 'id', account_id: proj.accountId, project_id: proj.agentId, ...h.query };
  const headers: Record<string, string> = { ...h.headers };
  if (k !== null) headers['x-api-key'] = k;
  if (h.type !== null) headers['content-type'] = h.type ?? 'application/json';
  return http(base, 'POST', `/v1/external-events/webhook?${toQuery(query)}`, { raw: h.raw ?? '', headers });
}
