import type { HttpRequest, HttpResponse, TemplatedApp, us_socket_context_t, WebSocket } from '@trufflesuite/uws-js-unofficial';
import { randomUUID } from 'node:crypto';
import { decode, type Subscription } from '../../actors/mod.js';
import { own } from '../../platform/own.js';
import {
  EVENT_PREFIX,
  gatewayEvent,
  MAX_MESSAGE_BYTES,
  SERVER_EVENT_TYPES,
  sessionTopic,
  systemMessage,
  type Published,
  type SessionReply,
  type WireEvent,
} from '../../actors/session/mod.js';
import type { ClientKind, SessionEvent } from '../../machines/session.js';
import { jsonTooDeep } from '../../platform/json-depth.js';
import type { MessagingContext } from './context.js';
import type { GatewayDirectory } from './gateways.js';
import { errorBody, EVENT_ERRORS, HTTP_ERRORS, RATE_LIMIT_WARNING, type MessagingHttpError } from './errors.js';
import { checkHandshake, handshakeRequest, type HandshakeCheck } from './handshake.js';
import { parseJson, write } from './http.js';
import { socketCloses } from '../../platform/metrics.js';
import { RateLimiter } from '../../platform/rate-limit.js';
import type { AccessClaims } from './tokens.js';
import { ConnectionCaps } from './connection-caps.js';

/** What a socket carries from its handshake. */
interface SocketData {
  sessionId: string;
  connectionId: string;
  claims: AccessClaims;
  cursor: number;
  /** Highest sequence sent to this socket (replay and live). */
  lastSeq: number;
  /** Live events that arrived while the replay (or a catch-up) was being read. */
  pending: Published | null;
  /** A catch-up was asked for while a read was under way, which may have come too early for it: read again after. */
  again: boolean;
  closed: boolean;
  /** Asks made for this socket's frames and not answered yet (`onMessage`). */
  asking: number;
  /** The session has ended: the socket closes once `asking` is 0, so a frame sent just before is still answered. */
  ending: boolean;
  /**
   * When the socket opened (ms since epoch; set as it is upgraded, and `open` runs within the upgrade): a close
   * soon after is counted apart (`socketCloses`).
   */
  openedAt: number;
  /** The account whose place in the gateway's caps (`ConnectionCaps`) the socket holds, given back on close. */
  account: string;
}

/** How soon after its open a close counts as early. */
const EARLY_CLOSE_MS = 1000;
/** The close code as a label: the standard ones (RFC 6455 7.4.1), others together, so the series stay few. */
const closeCodeLabel = (code: number): string => (code >= 1000 && code <= 1015 ? String(code) : 'other');

type Socket = WebSocket<SocketData>;

const CLIENT_TYPES: Record<string, ClientKind> = {
  EVENT_TYPE_REQUEST_SERVICE_AGENT_JOIN: 'JOIN',
  EVENT_TYPE_USER_MESSAGE: 'MESSAGE',
  EVENT_TYPE_USER_TYPING: 'TYPING',
  EVENT_TYPE_USER_END_SESSION: 'END',
  EVENT_TYPE_HEARTBEAT: 'HEARTBEAT',
};
const SERVER_TYPES = new Set<string>(SERVER_EVENT_TYPES.map((t) => EVENT_PREFIX + t));
const TYPING_STATES = new Set(['TYPING_STATE_STARTED', 'TYPING_STATE_STOPPED']);
const LANGUAGE = /^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$/;
/** Sockets read from the journal at once when the gateway is back on NATS. */
const CATCH_UP_AT_ONCE = 32;
/** The transport refuses frames this large outright (closing the socket); up to it, oversize gets an error event. */
const TRANSPORT_MAX_PAYLOAD = 1024 * 1024;
/**
 * `Retry-After` of the connection limit's 429 (contract 7.4: a 429 says when to retry). A place frees when one
 * of the session's sockets closes, which no clock predicts: a fixed 5 s is long enough that a client retrying
 * on it does not spend its address's rate on refusals, and short next to a tab being closed and reopened.
 */
const CONNECTION_LIMIT_RETRY_AFTER_S = 5;

/**
 * A client event as the gateway validated it, or the error message to answer it with. A frame nested deeper
 * than `JSON_MAX_DEPTH` is an invalid format (checked on the text before parsing): its `custom` would be
 * journaled and encoded by recursive encoders.
 */
export function parseClientEvent(text: string): { event: Omit<Extract<SessionEvent, { type: 'CLIENT' }>, 'at'> } | { error: string; custom: unknown } {
  if (jsonTooDeep(text)) return { error: EVENT_ERRORS.invalidFormat, custom: null };
  let raw: unknown;
  try {
    raw = parseJson(text);
  } catch {
    return { error: EVENT_ERRORS.invalidFormat, custom: null };
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return { error: EVENT_ERRORS.invalidFormat, custom: null };
  const msg = raw as { type?: unknown; payload?: unknown; metadata?: unknown };
  const metadata = msg.metadata && typeof msg.metadata === 'object' && !Array.isArray(msg.metadata) ? (msg.metadata as Record<string, unknown>) : null;
  const customRaw = metadata?.custom;
  // Echoed back whatever JSON value it is (contract 6.3); only an object can carry a client_event_id.
  const custom: unknown = customRaw === undefined ? null : customRaw;
  const fields = customRaw && typeof customRaw === 'object' && !Array.isArray(customRaw) ? (customRaw as Record<string, unknown>) : null;
  if (typeof msg.type !== 'string') return { error: EVENT_ERRORS.invalidFormat, custom };
  if (SERVER_TYPES.has(msg.type)) return { error: EVENT_ERRORS.notAllowed(msg.type), custom };
  const kind = own(CLIENT_TYPES, msg.type);
  if (!kind) return { error: EVENT_ERRORS.invalidFormat, custom };
  if (msg.metadata !== undefined && metadata === null) return { error: EVENT_ERRORS.invalidFormat, custom };
  const payload = msg.payload === undefined || msg.payload === null ? {} : msg.payload;
  if (typeof payload !== 'object' || Array.isArray(payload)) return { error: EVENT_ERRORS.invalidFormat, custom };
  const p = payload as Record<string, unknown>;
  const clientEventId = typeof fields?.client_event_id === 'string' || typeof fields?.client_event_id === 'number' ? String(fields.client_event_id).slice(0, 256) : null;
  const base = { type: 'CLIENT' as const, kind, custom, clientEventId };
  if (kind === 'MESSAGE') {
    if (typeof p.text !== 'string' || p.text.trim() === '') return { error: EVENT_ERRORS.invalidFormat, custom };
    const language = typeof p.language_code === 'string' && LANGUAGE.test(p.language_code) ? p.language_code : undefined;
    return { event: { text: p.text, ...base, ...(language ? { language } : {}) } };
  }
  if (kind === 'TYPING') {
    if (typeof p.state !== 'string' || !TYPING_STATES.has(p.state)) return { error: EVENT_ERRORS.invalidFormat, custom };
    return { event: { typing: p.state, ...base } };
  }
  return { event: base };
}

/**
 * `GET /ws`: the handshake (HTTP errors of contract 7.4), then the session's socket: the journal replay
 * after `cursor` as one EVENT_BATCH, client events validated here and asked of the session actor, and
 * every event the session publishes on its topic forwarded to this gateway's sockets of the session.
 *
 * Connection counting across gateways: each socket registers with its session actor (CONNECT, refused past
 * the limit) and deregisters on close (DISCONNECT). A gateway that dies says nothing; its connections stop
 * counting once its heartbeat is older than the TTL (`gateways.ts`): CONNECT carries the live gateways.
 * Apart from that, this process caps its own sockets, in all and per account (`connection-caps.ts`).
 */
export function mountSocket(app: TemplatedApp, ctx: MessagingContext, o: { gateways: GatewayDirectory }) {
  /** This gateway's sockets per session, and its subscription to each session's topic. */
  const sockets = new Map<string, Set<Socket>>();
  const subscriptions = new Map<string, Subscription>();
  const wsLimiter = new RateLimiter(ctx.config.wsRatePerSecond, ctx.config.wsRatePerSecond * 2);
  const caps = new ConnectionCaps(ctx.config.maxSockets, ctx.config.maxSocketsPerAccount);
  const transport = ctx.runtime.transport;

  const ask = (sessionId: string, event: SessionEvent, retried?: () => void) =>
    ctx.runtime.client.ask<SessionReply>('session', sessionId, event as never, retried ? { retried } : {});

  /**
   * Published events waiting for the end of this turn of the event loop, per socket (`deliver`). A user
   * message's echo and the agent's answer to it are usually committed in one group commit, and so published
   * one after the other within one turn: sent together, they go out in one write to the socket instead of one
   * each, a system call a message fewer.
   */
  const outbox = new Map<Socket, { d: SocketData; events: Published }>();
  let flushScheduled = false;
  const flushOutbox = () => {
    flushScheduled = false;
    for (const [ws, { d, events }] of outbox) deliverNow(ws, d, events);
    outbox.clear();
  };

  // uWS throws on any use of a closed socket, user data included: callers pass the data they captured.
  const sendNow = (ws: Socket, d: SocketData, text: string) => {
    if (!d.closed) ws.send(text, false);
  };
  /** Sends a frame of this gateway's own, after what was published to the socket before it. */
  const send = (ws: Socket, d: SocketData, text: string) => {
    const queued = outbox.get(ws);
    if (queued) {
      outbox.delete(ws);
      deliverNow(ws, d, queued.events);
    }
    sendNow(ws, d, text);
  };
  const sendEvent = (ws: Socket, d: SocketData, e: WireEvent) => send(ws, d, JSON.stringify(e));

  /** Sends published events to one socket at the end of this turn, with any others published to it meanwhile. */
  const deliver = (ws: Socket, d: SocketData, events: Published) => {
    const queued = outbox.get(ws);
    if (queued) queued.events.push(...events);
    else outbox.set(ws, { d, events: events.slice() });
    if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flushOutbox);
    }
  };

  /**
   * Sends published events to one socket in one write, skipping journaled ones it has (from the replay). A
   * journaled event whose sequence is past the next one the socket is owed means some were never heard here
   * (published while this gateway was cut off from NATS, or never, by a worker that died between its commit and
   * the publication): the socket is caught up from the journal first (`catchUp`), unless this is the catch-up.
   */
  const deliverNow = (ws: Socket, d: SocketData, events: Published, catchingUp = false) => {
    if (d.closed) return;
    let ended = false;
    let missed = -1;
    ws.cork(() => {
      for (let i = 0; i < events.length; i++) {
        const e = events[i]!;
        if (e.s !== null) {
          if (e.s <= d.lastSeq) continue;
          if (e.s > d.lastSeq + 1 && !catchingUp) {
            missed = i;
            break;
          }
          d.lastSeq = e.s;
        }
        sendNow(ws, d, e.j);
        if (e.j.includes('"EVENT_TYPE_SESSION_END"')) ended = true;
      }
    });
    if (missed >= 0) void catchUp(ws, d, events.slice(missed));
    // The session is over: nothing more will come on this socket, once what it asked is answered (a message
    // sent right after its own end, say, gets "Error: Session not found").
    if (ended) endSoon(ws, d);
  };

  /** Closes the socket of an ended session once its asks are answered. */
  const endSoon = (ws: Socket, d: SocketData) => {
    d.ending = true;
    if (d.asking === 0 && !d.closed) ws.end(1000, 'session ended');
  };

  /**
   * Sends a socket what the journal has after the last sequence it was sent, then `then`; events published to
   * it meanwhile wait (`pending`), as during the replay. Once: the journal has every committed step, so what is
   * still missing after it is skipped rather than read again.
   */
  const catchUp = async (ws: Socket, d: SocketData, then: Published = []): Promise<void> => {
    if (d.closed) return;
    // A replay or a catch-up under way: events wait for it (its read is after them, or their sequences show
    // what it missed); a catch-up asked for without events (a reconnection) may come after its read: once more.
    if (d.pending) {
      d.pending.push(...then);
      if (!then.length) d.again = true;
      return;
    }
    d.pending = then.slice();
    let frames: Published = [];
    try {
      frames = await ctx.history.after(d.sessionId, d.lastSeq);
    } catch (err) {
      ctx.logger.warn({ err: String(err), session: d.sessionId }, 'catching a socket up from the journal failed');
    }
    const pending = d.pending;
    d.pending = null;
    deliverNow(ws, d, frames.concat(pending), true);
    readAgain(ws, d);
  };
  const readAgain = (ws: Socket, d: SocketData) => {
    if (!d.again || d.closed) return;
    d.again = false;
    void catchUp(ws, d);
  };

  // Published while cut off from NATS is published to no one: every socket reads what it missed, once the
  // subscriptions are back on the server (flushed), a few at a time (they are read on the thread serving them).
  const catchUpAll = async () => {
    await transport.flush().catch(() => undefined);
    const all = [...sockets.values()].flatMap((set) => [...set].map((ws) => ({ ws, d: ws.getUserData() })));
    for (let i = 0; i < all.length; i += CATCH_UP_AT_ONCE) await Promise.all(all.slice(i, i + CATCH_UP_AT_ONCE).map(({ ws, d }) => catchUp(ws, d)));
  };
  const unwatch = transport.onReconnect?.(() => void catchUpAll());

  const onPublished = (sessionId: string) => (data: Uint8Array) => {
    let events: Published;
    try {
      events = decode<Published>(data);
    } catch {
      return;
    }
    for (const ws of [...(sockets.get(sessionId) ?? [])]) {
      const d = ws.getUserData();
      if (d.closed) continue;
      if (d.pending) d.pending.push(...events);
      else deliver(ws, d, events);
    }
  };

  /** Registers a socket; a new subscription is flushed to the server before the replay is read. */
  const register = async (ws: Socket) => {
    const { sessionId } = ws.getUserData();
    let set = sockets.get(sessionId);
    if (!set) sockets.set(sessionId, (set = new Set()));
    set.add(ws);
    if (!subscriptions.has(sessionId)) {
      subscriptions.set(sessionId, transport.subscribe(sessionTopic(sessionId), onPublished(sessionId)));
      await transport.flush();
    }
  };

  const unregister = (ws: Socket) => {
    const { sessionId } = ws.getUserData();
    const set = sockets.get(sessionId);
    set?.delete(ws);
    if (set && set.size === 0) {
      sockets.delete(sessionId);
      subscriptions.get(sessionId)?.unsubscribe();
      subscriptions.delete(sessionId);
    }
  };

  const replay = async (ws: Socket, d: SocketData) => {
    // Read after the subscription is in place: whatever was committed before is in the journal, whatever
    // is committed after is published to this gateway; overlaps are dropped by sequence.
    const { frames, head: last, past } = await ctx.history.resume(d.sessionId, d.cursor);
    if (d.closed) return;
    if (past) {
      ctx.logger.info({ session: d.sessionId, cursor: d.cursor, last }, 'cursor past the session\'s last event read as seq:0');
      d.cursor = 0;
    }
    const batch = gatewayEvent('EVENT_BATCH', {}, null);
    const head = JSON.stringify({ ...batch, payload: undefined }).slice(0, -1);
    // Frames are wire JSON already: the batch is assembled without parsing them again.
    const text = `${head},"payload":{"events":[${frames.map((f) => f.j).join(',')}]}}`;
    d.lastSeq = Math.max(d.cursor, frames.length ? frames[frames.length - 1].s! : 0);
    const pending = d.pending ?? [];
    d.pending = null;
    ws.cork(() => sendNow(ws, d, text));
    if (pending.length) deliverNow(ws, d, pending);
    readAgain(ws, d);
  };

  /**
   * Catches a socket up from the journal after an ask of its frame that was refused, failed or retried, before the
   * answer goes out. A worker that dies between a step's commit and its publication publishes nothing, and only a
   * later published event would show the gap (`deliverNow`): none comes after a session's end, so the socket would
   * never get the SESSION_END (nor be closed) and every later frame would be refused as for an unknown session.
   * After a retry (`failedOver`: the owner may have died) every socket of the session on this gateway is caught
   * up, since none of them heard the step; a refusal alone concerns the asking socket (the others learn at
   * their next frame).
   */
  const catchUpAfterAsk = async (ws: Socket, d: SocketData, failedOver: boolean) => {
    const others = failedOver ? [...(sockets.get(d.sessionId) ?? [])].filter((s) => s !== ws && !s.getUserData().closed) : [];
    await Promise.all([catchUp(ws, d), ...others.map((s) => catchUp(s, s.getUserData()))]);
  };

  const answerDuplicate = async (ws: Socket, d: SocketData, seq: number) => {
    const frame = await ctx.history.at(d.sessionId, seq);
    if (frame) send(ws, d, frame);
  };

  const onMessage = async (ws: Socket, d: SocketData, text: string | null, tooLarge = false) => {
    d.asking++;
    try {
      await answer(ws, d, text, tooLarge);
    } finally {
      d.asking--;
      if (d.ending) endSoon(ws, d);
    }
  };

  /** Validates a client frame, asks the session actor and answers what is not published (errors, duplicates). */
  const answer = async (ws: Socket, d: SocketData, text: string | null, tooLarge: boolean) => {
    const fail = (message: string, custom: unknown) => sendEvent(ws, d, systemMessage('ERROR', message, custom));
    if (text === null) return fail(EVENT_ERRORS.invalidFormat, null);
    const parsed = parseClientEvent(text);
    // Refused for its size, but still answered with its custom (contract 2.9: echoed in error events too).
    if (tooLarge) return fail(EVENT_ERRORS.invalidFormat, 'error' in parsed ? parsed.custom : parsed.event.custom);
    if ('error' in parsed) return fail(parsed.error, parsed.custom);
    const { event } = parsed;
    // The session has ended: answered here, not asked (a client sending on would hold the socket open).
    if (d.ending) return fail(EVENT_ERRORS.sessionNotFound, event.custom);
    if (wsLimiter.take(d.sessionId)) return sendEvent(ws, d, systemMessage('WARNING', RATE_LIMIT_WARNING, event.custom));
    if ((event.kind === 'JOIN' || event.kind === 'MESSAGE') && !(await ctx.connectorOf(d.claims))) return fail(EVENT_ERRORS.connectorNotFound, event.custom);
    let reply: SessionReply;
    let failedOver = false;
    try {
      reply = await ask(d.sessionId, Object.assign({}, event, { at: Date.now() }), () => (failedOver = true));
    } catch (err) {
      ctx.logger.warn({ err: String(err), session: d.sessionId }, 'session ask failed');
      // The session did not answer (no worker reachable, or a timeout): the client may retry the same event.
      await catchUpAfterAsk(ws, d, true);
      return fail(EVENT_ERRORS.unableToRetrieve, event.custom);
    }
    // Asked again, or refused (the session is over, say): the step that answered or ended it may be one this
    // gateway never heard (see `catchUpAfterAsk`).
    if (failedOver || !reply.ok) await catchUpAfterAsk(ws, d, failedOver);
    if (!reply.ok) return fail(reply.message ?? EVENT_ERRORS.sessionNotFound, event.custom);
    if (reply.duplicateOf !== undefined) await answerDuplicate(ws, d, reply.duplicateOf);
  };

  /**
   * Answers a refusal as the Messaging API's other HTTP answers are (`write`: the browser widget's CORS header,
   * `Retry-After` exposed on a 429); a HEAD's without its body.
   */
  const refuse = (res: HttpResponse, aborted: () => boolean, err: MessagingHttpError, headers: Record<string, string> = {}, head = false) =>
    write(res, aborted, { status: err.status, body: errorBody(err), headers }, head);

  /**
   * Runs the handshake's checks on the socket path's request (read at once: uWebSockets.js invalidates it when
   * the handler returns) and answers a refusal; `then` gets what passed, and answers or upgrades. A failure of
   * `then` is a 500, logged as `failed`.
   */
  const afterChecks = (
    res: HttpResponse,
    req: HttpRequest,
    failed: string,
    head: boolean,
    then: (checked: Extract<HandshakeCheck, { ok: true }>, isAborted: () => boolean) => Promise<void>,
  ) => {
    const request = handshakeRequest(res, req);
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const isAborted = () => aborted;
    void (async () => {
      const checked = await checkHandshake(ctx, request);
      if (!checked.ok) return refuse(res, isAborted, checked.error, checked.headers, head);
      await then(checked, isAborted);
    })().catch((err) => {
      ctx.logger.error({ err }, failed);
      refuse(res, isAborted, HTTP_ERRORS.internal, {}, head);
    });
  };

  /**
   * The handshake: every check before the upgrade, so that errors are HTTP statuses (contract 7.4); then the
   * session actor's CONNECT, which registers the connection (refused when the session is over or full).
   */
  const upgrade = (res: HttpResponse, req: HttpRequest, context: us_socket_context_t) => {
    const key = req.getHeader('sec-websocket-key');
    const protocol = req.getHeader('sec-websocket-protocol');
    const extensions = req.getHeader('sec-websocket-extensions');
    afterChecks(res, req, 'handshake failed', false, async ({ sessionId, claims, cursor }, isAborted) => {
      // The session's owner, as the handshake checked it against the token: its place in this process's caps
      // is taken before the session is asked (no socket is accepted past them), and kept by the socket.
      const account = claims.account_id;
      const full = caps.take(account);
      if (full) {
        ctx.logger.warn({ account, session: sessionId, cap: full, open: caps.held(), openForAccount: caps.held(account) }, 'socket upgrade refused: connection cap reached');
        const err = full === 'account' ? HTTP_ERRORS.accountConnectionLimit : HTTP_ERRORS.gatewayConnectionLimit;
        return refuse(res, isAborted, err, { 'retry-after': String(CONNECTION_LIMIT_RETRY_AFTER_S) });
      }
      let upgraded = false;
      try {
        const connectionId = randomUUID();
        let reply: SessionReply;
        try {
          reply = await ask(sessionId, { type: 'CONNECT', connectionId, gateway: ctx.gatewayId, at: Date.now(), liveGateways: o.gateways.live() });
        } catch (err) {
          ctx.logger.warn({ err: String(err), session: sessionId }, 'session connect failed');
          return refuse(res, isAborted, HTTP_ERRORS.internal);
        }
        if (!reply.ok) {
          if (reply.error === 'limit') return refuse(res, isAborted, HTTP_ERRORS.connectionLimit, { 'retry-after': String(CONNECTION_LIMIT_RETRY_AFTER_S) });
          return refuse(res, isAborted, HTTP_ERRORS.sessionNotFound);
        }
        if (isAborted()) {
          void ask(sessionId, { type: 'DISCONNECT', connectionId, at: Date.now() }).catch(() => undefined);
          return;
        }
        const data: SocketData = { sessionId, connectionId, claims, cursor, lastSeq: cursor, pending: [], again: false, closed: false, asking: 0, ending: false, openedAt: Date.now(), account };
        res.cork(() => res.upgrade(data, key, protocol, extensions, context));
        // From here the socket holds the place: its close handler gives it back, whatever closes it.
        upgraded = true;
      } finally {
        if (!upgraded) caps.release(account);
      }
    });
  };

  /**
   * A plain GET of the socket path (no WebSocket upgrade: uWebSockets.js hands the socket route only requests
   * with a `Sec-WebSocket-Key`): the handshake's checks, so bad parameters, credentials and sessions get the
   * statuses an upgrade would; then 400 UPGRADE_REQUIRED. Nothing is registered with the session; whether it
   * is over is read from its journal's last step, which CONNECT would otherwise tell.
   */
  const plainGet = (head: boolean) => (res: HttpResponse, req: HttpRequest) => {
    afterChecks(res, req, 'socket path GET failed', head, async ({ sessionId }, isAborted) => {
      if (await ctx.history.closed(sessionId)) return refuse(res, isAborted, HTTP_ERRORS.sessionNotFound, {}, head);
      refuse(res, isAborted, HTTP_ERRORS.upgradeRequired, {}, head);
    });
  };

  app.ws<SocketData>('/ws', {
    maxPayloadLength: TRANSPORT_MAX_PAYLOAD,
    // uWS pings a quiet socket and closes it when nothing comes back within this: a peer that vanished
    // without closing (a dropped mobile link) frees its place in the session's connection count.
    idleTimeout: ctx.config.idleTimeoutS,
    sendPingsAutomatically: true,
    maxBackpressure: 4 * 1024 * 1024,
    upgrade,
    open: (ws) => {
      const d = ws.getUserData();
      void register(ws)
        .then(() => replay(ws, d))
        .catch((err) => {
          ctx.logger.error({ err: String(err) }, 'replay failed');
          if (!d.closed) ws.end(1011, 'replay failed');
        });
    },
    message: (ws, message, isBinary) => {
      const text = isBinary ? null : Buffer.from(message).toString('utf8');
      void onMessage(ws, ws.getUserData(), text, message.byteLength > MAX_MESSAGE_BYTES).catch((err) => ctx.logger.error({ err: String(err) }, 'socket message failed'));
    },
    close: (ws, code) => {
      const d = ws.getUserData();
      d.closed = true;
      // Every close comes here (the client's, the server's, a session's end, a ping unanswered, backpressure).
      caps.release(d.account);
      outbox.delete(ws);
      socketCloses.inc({ code: closeCodeLabel(code), early: String(Date.now() - d.openedAt < EARLY_CLOSE_MS) });
      unregister(ws);
      void ask(d.sessionId, { type: 'DISCONNECT', connectionId: d.connectionId, at: Date.now() }).catch(() => undefined);
    },
  });

  app.get('/ws', plainGet(false));
  // A HEAD of the socket path is told what its GET would be, without the body (uWebSockets.js routes it apart).
  app.head('/ws', plainGet(true));

  return {
    /** Sessions with at least one socket on this gateway now. */
    get sessions(): number {
      let n = 0;
      for (const set of sockets.values()) if (set.size > 0) n++;
      return n;
    },
    /** Sockets open on this gateway now. */
    get connections(): number {
      let n = 0;
      for (const set of sockets.values()) n += set.size;
      return n;
    },
    /** Closes every socket (going away); their sessions hear DISCONNECT from the close handler. */
    async close(): Promise<void> {
      unwatch?.();
      // What was published before the close still goes out ahead of it.
      flushOutbox();
      const all = [...sockets.values()].flatMap((s) => [...s]);
      const left = all.map((ws) => ({ sessionId: ws.getUserData().sessionId, connectionId: ws.getUserData().connectionId }));
      for (const ws of all) if (!ws.getUserData().closed) ws.end(1001, 'gateway draining');
      await Promise.all(left.map((l) => ask(l.sessionId, { type: 'DISCONNECT', connectionId: l.connectionId, at: Date.now() }).catch(() => undefined)));
    },
  };
}
