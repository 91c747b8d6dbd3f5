import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { AnyStateMachine } from 'xstate';
import { bearerToken } from '../../../platform/bearer.js';
import { secretMatches } from '../../../platform/secrets.js';
import type { Services } from '../../../platform/services.js';
import { machineOf } from './charts.js';
import { MarksTracker } from './marks.js';
import { maybeMask, maybeMaskEvent } from './mask.js';
import { currentSnapshot, tailSteps } from './steps.js';
import { acceptUpgrade, refuseUpgrade, type FeedSocket } from './websocket.js';

/**
 * The `@statelyai/inspect` feed of one actor, a WebSocket on the edge port at
 * `/admin/v1/inspector/actors/{kind}/{id}/inspect` (operator token as `Authorization: Bearer`, or `?token=`
 * for clients that cannot set headers). Messages are JSON text in that protocol's shapes: first
 * `@xstate.actor` (the machine's definition as JSON, the current snapshot), then per committed step one
 * `@xstate.event` per domain event it emitted and an `@xstate.snapshot` with the state after it. Context and
 * event data are masked like the page (`?unmasked=true` to see them).
 */

const PATH = /^\/admin\/v1\/inspector\/actors\/([a-z][a-z0-9-]{0,31})\/([A-Za-z0-9_.-]{1,128})\/inspect$/;
/** The protocol version of `@statelyai/inspect` events these follow. */
export const STATELY_PROTOCOL_VERSION = '0.4.0';

/** A machine definition as `@statelyai/inspect` sends it: its config as JSON, functions by name. */
export function definitionJson(machine: AnyStateMachine): string {
  return JSON.stringify(machine.config, (_key, value) => (typeof value === 'function' ? { type: value.name || 'anonymous' } : value));
}

export function inspectorFeed(app: FastifyInstance, o: { services: Services; operatorTokenHash: string; tailIntervalMs?: number }): void {
  const open = new Set<FeedSocket>();
  app.addHook('preClose', async () => {
    for (const s of open) s.close(1001);
  });
  app.server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://edge');
    const m = PATH.exec(url.pathname);
    if (!m) return refuseUpgrade(socket, 404, 'Not Found', { message: 'no WebSocket here', errors: [] });
    const bearer = bearerToken(req.headers.authorization) ?? url.searchParams.get('token');
    if (!bearer || !secretMatches(bearer, o.operatorTokenHash)) {
      return refuseUpgrade(socket, 401, 'Unauthorized', { message: 'missing or invalid operator token', errors: [] });
    }
    const [, kind, id] = m;
    const key = `${kind}/${id}`;
    // As the REST routes take it: `true` or `false`, once, or not at all.
    const flags = url.searchParams.getAll('unmasked');
    if (flags.length > 1 || (flags.length === 1 && flags[0] !== 'true' && flags[0] !== 'false')) {
      return refuseUpgrade(socket, 400, 'Bad Request', { message: 'unmasked must be true or false', errors: [{ field: 'unmasked', message: 'unmasked must be true or false' }] });
    }
    const unmasked = flags[0] === 'true';
    void (async () => {
      const d = await currentSnapshot(o.services.store, key);
      if (!d) return refuseUpgrade(socket, 404, 'Not Found', { message: 'actor not found', errors: [{ field: 'id', message: 'actor not found' }] });
      const ws = acceptUpgrade(req, socket, head);
      if (!ws) return;
      open.add(ws);
      const machine = machineOf(kind);
      const base = () => ({ sessionId: key, rootId: key, createdAt: Date.now().toString(), id: randomUUID(), _version: STATELY_PROTOCOL_VERSION });
      // Brought up to date with every batch of steps: a step may mark a value, or deliver an answer its conversation marked.
      const marks = new MarksTracker(o.services.store, kind, id);
      let marked = unmasked ? [] : await marks.first(d.context);
      const snap = (x: { status: string; value: unknown; context: unknown }) => ({ status: x.status, value: x.value, context: maybeMask(x.context, unmasked, marked) });
      ws.send(JSON.stringify({
        type: '@xstate.actor',
        name: machine?.id ?? kind,
        parentId: undefined,
        definition: machine ? definitionJson(machine) : JSON.stringify({ id: kind }),
        snapshot: snap(d),
        ...base(),
      }));
      const stop = tailSteps({
        store: o.services.store,
        key,
        afterVersion: d.version,
        intervalMs: o.tailIntervalMs ?? 100,
        onSteps: async (steps, now) => {
          if (!unmasked) marked = await marks.after((now ?? d).context, steps);
          steps.forEach((s, i) => {
            const events = s.events.map((e) => Object.assign({}, maybeMaskEvent(e.type, e.data, unmasked, marked) as object, { type: e.type }));
            for (const event of events) ws.send(JSON.stringify({ type: '@xstate.event', event, sourceId: key, ...base() }));
            const last = i === steps.length - 1 && now;
            ws.send(JSON.stringify({
              type: '@xstate.snapshot',
              event: events[0] ?? { type: 'xstate.step' },
              snapshot: last ? snap(now) : { status: 'active', value: s.value },
              ...base(),
            }));
          });
        },
        onError: (err) => app.log.warn({ err, key }, 'inspector feed: reading the journal failed'),
      });
      ws.onClose(() => {
        stop();
        open.delete(ws);
      });
    })().catch((err) => {
      app.log.warn({ err, key }, 'inspector feed failed');
      socket.destroy();
    });
  });
}
