import type { TemplatedApp } from '@trufflesuite/uws-js-unofficial';
import type { SessionEvent } from '../../machines/session.js';
import type { SessionRecord, SessionReply } from '../../actors/session/mod.js';
import { SESSION_ID, type MessagingContext } from './context.js';
import { HTTP_ERRORS } from './errors.js';
import { bodyObject, HttpFailure, ok } from './http.js';

const TYPING_STATES = new Set(['TYPING_STATE_STARTED', 'TYPING_STATE_STOPPED']);

/** The desk's view of a session. */
const view = (r: SessionRecord) => ({
  session_id: r.id,
  project_id: r.project_id,
  status: r.status,
  platform: r.platform,
  created_at: r.created_at,
  updated_at: r.updated_at,
  handoff: r.handoff,
  live_agent: r.live_agent,
  user_typing: r.user_typing,
});

/**
 * The live-agent desk: where people answer sessions handed off server-managed. A live agent authenticates
 * with an API key of scope `live_agent` (`x-api-key`); the key's id is the agent's `id`. Endpoints, all
 * scoped to the key's account (and project, when the key names one):
 *
 * - `GET /api/v1/desk/sessions?status=waiting|live|active|ended` (default `waiting`): sessions, in queue order.
 * - `GET /api/v1/desk/sessions/{id}` and `GET .../{id}/events?after=<seq>`: a session and its journal
 *   (what the user wrote while waiting and since; the desk polls it).
 * - `POST .../{id}/accept` `{name?, avatar_url?}`: takes a waiting session (LIVE_AGENT_JOINED).
 * - `POST .../{id}/typing` `{state}`, `POST .../{id}/messages` `{text}`, `POST .../{id}/leave`.
 */
/** A live agent's key, as far as the desk's checks read it. */
type DeskKey = { account_id: string; project_id: string | null };

export function mountDesk(app: TemplatedApp, ctx: MessagingContext): void {
  const agentOf = async (apiKey: string) => {
    const key = await ctx.services.keys.verify(apiKey || undefined);
    if (!key || key.scope !== 'live_agent') throw new HttpFailure(HTTP_ERRORS.deskUnauthorized);
    return key;
  };

  /** What `read` finds of session `id` when it is one of the key's account (and project); otherwise 404. */
  const mine = async <T extends { account_id: string; project_id: string }>(key: DeskKey, id: string, read: (id: string) => Promise<T | null>): Promise<T> => {
    const found = SESSION_ID.test(id) ? await read(id) : null;
    if (!found || found.account_id !== key.account_id || (key.project_id && found.project_id !== key.project_id)) throw new HttpFailure(HTTP_ERRORS.sessionNotFound);
    return found;
  };

  /** The session's record (a projection): for the desk's views. */
  const sessionOf = (key: DeskKey, id: string) => mine(key, id, (x) => ctx.records.get(x));

  /**
   * A session of the key's account (and project), from its creation in the actor journal: the desk's actions
   * must reach a session the moment its visitor is told it waits, before the records (a projection) show it.
   */
  const ownedSession = async (key: DeskKey, id: string): Promise<string> => {
    await mine(key, id, (x) => ctx.history.owner(x));
    return id;
  };

  const ask = async (id: string, event: SessionEvent) => {
    const reply = await ctx.runtime.client.ask<SessionReply>('session', id, event as never);
    if (reply.ok) return { ok: true };
    if (reply.error === 'not_waiting') throw new HttpFailure(HTTP_ERRORS.deskNotWaiting);
    if (reply.error === 'not_agent') throw new HttpFailure(HTTP_ERRORS.deskNotAgent);
    throw new HttpFailure(HTTP_ERRORS.deskNotLive);
  };

  app.get('/api/v1/desk/sessions', ctx.route(['x-api-key'], 0, async ({ headers, query }) => {
    const key = await agentOf(headers['x-api-key']);
    const status = new URLSearchParams(query).get('status') ?? 'waiting';
    if (!['waiting', 'live', 'active', 'ended'].includes(status)) throw new HttpFailure(HTTP_ERRORS.badRequest, {}, 'status must be waiting, live, active or ended');
    const filter: Record<string, unknown> = { account_id: key.account_id, status };
    if (key.project_id) filter.project_id = key.project_id;
    const found = await ctx.records.find(filter, { sort: { 'handoff.queued_at': 1, created_at: 1 }, limit: 500 });
    return ok({ data: found.map(view) });
  }, { body: false }));

  app.get('/api/v1/desk/sessions/:id', ctx.route(['x-api-key'], 1, async ({ headers, params }) => {
    const key = await agentOf(headers['x-api-key']);
    return ok(view(await sessionOf(key, params[0])));
  }, { body: false }));

  app.get('/api/v1/desk/sessions/:id/events', ctx.route(['x-api-key'], 1, async ({ headers, params, query }) => {
    const key = await agentOf(headers['x-api-key']);
    const id = await ownedSession(key, params[0]);
    const after = Number(new URLSearchParams(query).get('after') ?? '0');
    if (!Number.isInteger(after) || after < 0) throw new HttpFailure(HTTP_ERRORS.badRequest, {}, 'after must be a sequence number');
    const frames = await ctx.history.after(id, after, 1000);
    return ok({ events: frames.map((f) => JSON.parse(f.j)), last_sequence: frames.length ? frames[frames.length - 1].s : after });
  }, { body: false }));

  app.post('/api/v1/desk/sessions/:id/accept', ctx.route(['x-api-key'], 1, async ({ headers, params, body, contentCoding }) => {
    const key = await agentOf(headers['x-api-key']);
    const id = await ownedSession(key, params[0]);
    const b = bodyObject({ body, contentCoding });
    const name = typeof b.name === 'string' && b.name.trim() ? b.name.trim().slice(0, 128) : 'Live agent';
    const avatar = typeof b.avatar_url === 'string' ? b.avatar_url.slice(0, 2048) : '';
    return ok(await ask(id, { type: 'DESK_ACCEPT', agent: { id: key.id, name, avatar_url: avatar }, at: Date.now() }));
  }));

  app.post('/api/v1/desk/sessions/:id/typing', ctx.route(['x-api-key'], 1, async ({ headers, params, body, contentCoding }) => {
    const key = await agentOf(headers['x-api-key']);
    const id = await ownedSession(key, params[0]);
    const b = bodyObject({ body, contentCoding });
    if (typeof b.state !== 'string' || !TYPING_STATES.has(b.state)) throw new HttpFailure(HTTP_ERRORS.badRequest, {}, 'state must be TYPING_STATE_STARTED or TYPING_STATE_STOPPED');
    return ok(await ask(id, { type: 'DESK_TYPING', agentId: key.id, state: b.state, at: Date.now() }));
  }));

  app.post('/api/v1/desk/sessions/:id/messages', ctx.route(['x-api-key'], 1, async ({ headers, params, body, contentCoding }) => {
    const key = await agentOf(headers['x-api-key']);
    const id = await ownedSession(key, params[0]);
    const b = bodyObject({ body, contentCoding });
    if (typeof b.text !== 'string' || !b.text.trim() || b.text.length > 32_768) throw new HttpFailure(HTTP_ERRORS.badRequest, {}, 'text must be a non-empty string');
    return ok(await ask(id, { type: 'DESK_MESSAGE', agentId: key.id, text: b.text, at: Date.now() }));
  }));

  app.post('/api/v1/desk/sessions/:id/leave', ctx.route(['x-api-key'], 1, async ({ headers, params }) => {
    const key = await agentOf(headers['x-api-key']);
    const id = await ownedSession(key, params[0]);
    return ok(await ask(id, { type: 'DESK_LEAVE', agentId: key.id, at: Date.now() }));
  }));
}
