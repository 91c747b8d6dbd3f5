import { assign, fromPromise, setup } from 'xstate';

/**
 * One Messaging API session (contract 2.9, 3.4, 4.7, 6.3; addendum "Messaging API"): the journal of its
 * events, the agent that joins on request and answers through the session's conversation, the live-agent
 * handoff (server- or client-managed), the sockets open on it across gateways, and idle expiry.
 *
 * The machine is pure. Every event it produces goes into `outbox` with a running number `n` and, when it
 * is journaled, a `seq`; the actor host (`actors/session`) writes journaled events to the journal and
 * publishes every new one on the session's topic. The outbox keeps what was produced since the previous
 * external event: everything older has been persisted and flushed by then (the host handles one external
 * event at a time and persists after it). Effects (starting the agent, a turn, closing the conversation,
 * durable timers) are invoked actors named in `setup` and provided at run time.
 */

/** The five client event kinds (addendum): join, user message, typing, end session, heartbeat. */
export type ClientKind = 'JOIN' | 'MESSAGE' | 'TYPING' | 'END' | 'HEARTBEAT';

/** Fixed at creation: who the session belongs to and the limits it runs with. */
export interface SessionInfo {
  accountId: string;
  projectId: string;
  connectorId: string;
  environment: string;
  variantId: string | null;
  streaming: boolean;
  platform: string;
  userAgent: string;
  createdAt: number;
  /** The session ends this long after its last activity. */
  idleMs: number;
  /** Simultaneous connections allowed. */
  maxConnections: number;
  /** A connection whose gateway is not among the live ones counts this long after it was registered. */
  connectionTtlMs: number;
  /** A server-managed handoff that no live agent accepts within this long times out. */
  handoffTimeoutMs: number;
  /** While waiting for a live agent, the place in the queue is looked at this often (sent when it changed). */
  queueStatusMs: number;
}

/** An event the session produced, before the wire format (id, timestamp, prefix) is applied. */
export interface OutEvent {
  /** Running number of the session's events (journaled and transient). */
  n: number;
  /** Position in the journal; null for transient events (thinking, typing, system messages). */
  seq: number | null;
  /** Without the `EVENT_TYPE_` prefix. */
  type: string;
  payload: Record<string, unknown>;
  at: number;
  /** The client's `metadata.custom` of the event this answers. */
  custom: Record<string, unknown> | null;
}

/** What the agent effects answer: a reply, or why there is none. */
export interface AgentReply {
  at: number;
  /** Set when the agent could not answer (contract 7.4 messages are chosen from it). */
  failure: 'overload' | 'start' | 'respond' | 'stream' | null;
  text: string;
  suggestions: string[];
  end: boolean;
  handoff: { destination: string; reason: string } | null;
  /** How a handoff goes: by the live-agent desk, by the client, or not at all (no desk / bad configuration). */
  handoffMode: 'server' | 'client' | 'unavailable' | 'invalid';
  /** Place in the account's live-agent queue for a server-managed handoff. */
  queuePosition: number | null;
  agentName: string;
  agentAvatarUrl: string;
}

export interface LiveAgent {
  id: string;
  name: string;
  avatar_url: string;
}

/** The answer to the last external event, which the host sends back to the asker. */
export type SessionReply =
  | { ok: true; duplicateOf?: number }
  | { ok: false; error: 'not_found' | 'limit' | 'exists' | 'not_waiting' | 'not_live' | 'not_agent'; message?: string };

/** A user message waiting for the agent. */
interface PendingMessage {
  text: string;
  custom: Record<string, unknown> | null;
  at: number;
  /** Idempotency key of the conversation ask (stable across restarts). */
  askId: string;
}

export interface SessionContext {
  id: string;
  info: SessionInfo | null;
  n: number;
  nextSeq: number;
  outbox: OutEvent[];
  /** `n` when the previous external event arrived: outbox entries up to it are flushed. */
  mark: number;
  /**
   * Open connections: id → gateway and the time it stops counting unless its gateway is alive (gateways
   * keep a heartbeat, and CONNECT carries the live ones).
   */
  connections: Record<string, { gateway: string; until: number }>;
  /** Recent client_event_ids with the sequence of their echo, oldest first. */
  seen: Array<[string, number]>;
  joined: boolean;
  joinFailed: boolean;
  joinCustom: Record<string, unknown> | null;
  joinAt: number | null;
  language: string;
  queue: PendingMessage[];
  current: PendingMessage | null;
  handoff: { destination: string; reason: string; mode: string; queuePosition: number | null; queuedAt: number | null } | null;
  liveAgent: LiveAgent | null;
  userTyping: string;
  idleDeadline: number;
  handoffDeadline: number | null;
  /** When the place in the live-agent queue is looked at next. */
  queueCheckAt: number | null;
  endReason: string | null;
  endedAt: number | null;
  reply: SessionReply | null;
}

/**
 * Whether a registered connection still counts toward the limit at a CONNECT: its gateway is alive (its
 * heartbeat is recent), or it was registered within the TTL (its gateway may be too new to be listed yet).
 */
function counts(c: { gateway: string; until: number }, e: { at: number; liveGateways?: string[] }): boolean {
  return c.until > e.at || (e.liveGateways?.includes(c.gateway) ?? false);
}

export type SessionEvent =
  | { type: 'CREATE'; info: SessionInfo }
  | { type: 'CONNECT'; connectionId: string; gateway: string; at: number; liveGateways?: string[] }
  | { type: 'DISCONNECT'; connectionId: string; at: number }
  | {
      type: 'CLIENT';
      kind: ClientKind;
      text?: string;
      typing?: string;
      language?: string;
      custom: Record<string, unknown> | null;
      clientEventId: string | null;
      at: number;
    }
  | { type: 'DESK_ACCEPT'; agent: LiveAgent; at: number }
  | { type: 'DESK_TYPING'; agentId: string; state: string; at: number }
  | { type: 'DESK_MESSAGE'; agentId: string; text: string; at: number }
  | { type: 'DESK_LEAVE'; agentId: string; at: number }
  /** The conversation's agent speaks without a user message: an external event's function said `text` (and maybe ended). */
  | { type: 'AGENT_PUSH'; text: string; end: boolean; at: number };

export interface StartAgentInput {
  sessionId: string;
  info: SessionInfo;
  askId: string;
  at: number;
}
export interface ConverseInput extends StartAgentInput {
  text: string;
  language: string;
}
export interface QueueInput {
  sessionId: string;
  accountId: string;
  queuedAt: number;
}
export interface CloseInput {
  sessionId: string;
  askId: string;
  at: number;
}

/** Capabilities announced in SESSION_START (addendum). */
export const MAX_MESSAGE_BYTES = 131_072;
export const capabilities = (streaming: boolean) => ({
  streaming,
  max_message_size_bytes: MAX_MESSAGE_BYTES,
  max_reconnect_attempts: 5,
  heartbeat_interval_seconds: 30,
});

/** How many client_event_ids a session remembers for de-duplication. */
export const REMEMBERED_CLIENT_EVENTS = 100;
/** Streamed replies are cut into at most this many chunks. */
export const MAX_CHUNKS = 32;

/** The messages of contract 7.4 that the session itself raises. */
export const SESSION_ERRORS = {
  overload: 'Our system is experiencing high load. Please try again in a moment.',
  start: "Sorry, I'm unable to start a conversation right now. Please try again later.",
  respond: "Sorry, I'm having trouble responding right now. Please try again.",
  stream: 'Sorry, I encountered an error. Please try again.',
  sessionNotFound: 'Error: Session not found',
  conversationNotFound: 'Error: Conversation not found',
  conversationIdNotFound: 'Error: Conversation ID not found in session',
  handoffConnect: 'Sorry, we could not connect you to an agent. Please try again.',
  forward: 'Failed to forward message to live agent',
  handoffInit: 'Sorry, handoff could not be initiated.',
} as const;

/** Event types that never come from a client (answered with "Event type not allowed"). */
export const SERVER_EVENT_TYPES = [
  'SESSION_START', 'EVENT_BATCH', 'SERVICE_AGENT_JOINED', 'SERVICE_AGENT_THINKING', 'SERVICE_AGENT_MESSAGE',
  'SERVICE_AGENT_MESSAGE_CHUNK', 'SERVICE_AGENT_LEFT', 'SERVICE_AGENT_TRIGGERED_HANDOFF', 'HANDOFF_ACCEPTED',
  'HANDOFF_FAILED', 'HANDOFF_TIMEOUT', 'HANDOFF_QUEUE_STATUS', 'CLIENT_HANDOFF_REQUIRED', 'LIVE_AGENT_JOINED',
  'LIVE_AGENT_TYPING', 'LIVE_AGENT_MESSAGE', 'LIVE_AGENT_LEFT', 'LANGUAGE_CHANGED', 'SYSTEM_MESSAGE', 'SESSION_END',
] as const;

type Draft = Omit<OutEvent, 'n' | 'seq' | 'at'> & { journaled: boolean };

/** Appends events to the outbox, numbering them and giving journaled ones the next sequences. */
function emit(c: SessionContext, at: number, drafts: Draft[]): Pick<SessionContext, 'n' | 'nextSeq' | 'outbox'> {
  let { n, nextSeq } = c;
  const out = [...c.outbox];
  for (const d of drafts) {
    n++;
    out.push({ n, seq: d.journaled ? nextSeq++ : null, type: d.type, payload: d.payload, at, custom: d.custom });
  }
  return { n, nextSeq, outbox: out };
}

const ev = (type: string, payload: Record<string, unknown> = {}, custom: Record<string, unknown> | null = null, journaled = true): Draft => ({
  type,
  payload,
  custom,
  journaled,
});
const system = (level: 'INFO' | 'WARNING' | 'ERROR', message: string, custom: Record<string, unknown> | null = null) =>
  ev('SYSTEM_MESSAGE', { level: `SYSTEM_MESSAGE_LEVEL_${level}`, message }, custom, false);

/** Cuts a reply into chunks of whole words (with their trailing spaces), at most MAX_CHUNKS. */
export function chunkText(text: string): string[] {
  const words = text.match(/\S+\s*/g) ?? [];
  if (!words.length) return [text];
  const per = Math.max(1, Math.ceil(words.length / MAX_CHUNKS));
  const chunks: string[] = [];
  for (let i = 0; i < words.length; i += per) chunks.push(words.slice(i, i + per).join(''));
  // Leading spaces belong to the first chunk so that the chunks concatenate to the text exactly.
  const lead = /^\s*/.exec(text)![0];
  chunks[0] = lead + chunks[0];
  return chunks;
}

/** The agent's reply as one message or, on streaming sessions, as chunks sharing one message_id. */
function agentMessage(c: SessionContext, r: AgentReply, custom: Record<string, unknown> | null, type = 'SERVICE_AGENT'): Draft[] {
  const messageId = `msg_${c.id}_${c.n + 1}`;
  const base = { message_id: messageId, attachments: [], response_suggestions: r.suggestions.map((s) => ({ message_text: s })) };
  if (!c.info!.streaming) return [ev(`${type}_MESSAGE`, { ...base, text: r.text }, custom)];
  const parts = chunkText(r.text);
  return parts.map((text, i) =>
    ev(`${type}_MESSAGE_CHUNK`, {
      message_id: messageId,
      text,
      // Suggestions become known with the whole reply: they ride on the last chunk.
      attachments: [],
      response_suggestions: i === parts.length - 1 ? base.response_suggestions : [],
      chunk_index: i + 1,
      is_complete: i === parts.length - 1,
    }, custom),
  );
}

const CLIENT_HANDOFF_REASONS = ['COMPLEX_QUERY', 'AGENT_DECISION', 'POLICY'];
const clientHandoffReason = (reason: string) => {
  const upper = reason.toUpperCase();
  return CLIENT_HANDOFF_REASONS.find((r) => upper.includes(r.split('_')[0])) ?? 'AGENT_DECISION';
};

/**
 * Desk events a state does not take. Declared per state, never on an ancestor of the idle region: in a
 * parallel state both regions would otherwise select a transition for the same event.
 */
const deskRefused = {
  DESK_ACCEPT: { actions: { type: 'deskRefuse', params: 'not_waiting' } },
  DESK_TYPING: { actions: { type: 'deskRefuse', params: 'not_live' } },
  DESK_MESSAGE: { actions: { type: 'deskRefuse', params: 'not_live' } },
  DESK_LEAVE: { actions: { type: 'deskRefuse', params: 'not_live' } },
} as const;

const notProvided = () => {
  throw new Error('provided by the actor host');
};

type Ctx = { context: SessionContext; event: any };
const isClient = (kind: ClientKind) => ({ event }: Ctx) => event.type === 'CLIENT' && event.kind === kind;
const duplicate = ({ context, event }: Ctx) => event.clientEventId != null && context.seen.some(([id]) => id === event.clientEventId);
const freshClient = (kind: ClientKind) => (a: Ctx) => isClient(kind)(a) && !duplicate(a);

/** Trims the outbox to what arrived since the previous external event, and notes this one's start. */
const trimmed = (c: SessionContext) => ({ outbox: c.outbox.filter((e) => e.n > c.mark), mark: c.n });

/** Bookkeeping of every external event: outbox trimmed, reply cleared. */
const external = (c: SessionContext, reply: SessionReply = { ok: true }) => ({ ...trimmed(c), reply });

/** A client event's echo (journaled), remembering its client_event_id. */
const echo = (c: SessionContext, e: any, type: string, payload: Record<string, unknown> = {}) => {
  const base = { ...c, ...external(c) };
  const out = emit(base, e.at, [ev(type, payload, e.custom)]);
  const seen = e.clientEventId ? [...c.seen, [e.clientEventId, out.nextSeq - 1] as [string, number]].slice(-REMEMBERED_CLIENT_EVENTS) : c.seen;
  return { ...external(c), ...out, seen, idleDeadline: e.at + c.info!.idleMs };
};

/** Refuses a client event with an error the gateway sends to that socket only. */
const refuseClient = (message: string) => ({ type: 'refuse', params: message }) as const;

export const sessionMachine = setup({
  types: {} as { context: SessionContext; events: SessionEvent; input: { id: string } },
  actors: {
    startAgent: fromPromise<AgentReply, StartAgentInput>(notProvided),
    converse: fromPromise<AgentReply, ConverseInput>(notProvided),
    closeConversation: fromPromise<number, CloseInput>(notProvided),
    queuePosition: fromPromise<{ at: number; position: number }, QueueInput>(notProvided),
    sleepUntil: fromPromise<number, { until: number }>(notProvided),
  },
  guards: {
    idleExpired: ({ context, event }) => (event as any).output >= context.idleDeadline,
    duplicate: ({ context, event }) => duplicate({ context, event }),
    isJoin: ({ context, event }) => freshClient('JOIN')({ context, event }),
    isMessage: ({ context, event }) => freshClient('MESSAGE')({ context, event }),
    isTyping: ({ context, event }) => isClient('TYPING')({ context, event }),
    isEnd: ({ context, event }) => freshClient('END')({ context, event }),
    isHeartbeat: ({ context, event }) => freshClient('HEARTBEAT')({ context, event }),
    joinFailed: ({ context }) => context.joinFailed,
    agentFailed: ({ event }) => (event as any).output.failure !== null,
    agentEnds: ({ event }) => (event as any).output.end,
    serverHandoff: ({ event }) => (event as any).output.handoff !== null && (event as any).output.handoffMode === 'server',
    clientHandoff: ({ event }) => (event as any).output.handoff !== null && (event as any).output.handoffMode === 'client',
    failedHandoff: ({ event }) => (event as any).output.handoff !== null && (event as any).output.handoffMode === 'unavailable',
    invalidHandoff: ({ event }) => (event as any).output.handoff !== null && (event as any).output.handoffMode === 'invalid',
    queued: ({ context }) => context.queue.length > 0,
    isLiveAgent: ({ context, event }) => context.liveAgent?.id === (event as any).agentId,
    connectionAllowed: ({ context, event }) => {
      const e = event as Extract<SessionEvent, { type: 'CONNECT' }>;
      const live = Object.values(context.connections).filter((x) => counts(x, e)).length;
      return live < context.info!.maxConnections;
    },
  },
  actions: {
    refuse: assign(({ context }, message: string) => external(context, { ok: false, error: 'not_found', message })),
    deskRefuse: assign(({ context }, error: 'not_waiting' | 'not_live') => external(context, { ok: false, error })),
    replyDuplicate: assign(({ context, event }) => {
      const seq = context.seen.find(([id]) => id === (event as any).clientEventId)![1];
      return external(context, { ok: true, duplicateOf: seq });
    }),
    echoHeartbeat: assign(({ context, event }) => echo(context, event, 'HEARTBEAT')),
    typing: assign(({ context, event }) => ({
      ...external(context),
      userTyping: (event as any).typing ?? '',
      idleDeadline: (event as any).at + context.info!.idleMs,
    })),
    endByUser: assign(({ context, event }) => {
      const e = event as any;
      const echoed = echo(context, e, 'USER_END_SESSION');
      const after = { ...context, ...echoed };
      return { ...echoed, ...emit(after, e.at, [ev('SESSION_END', { reason: 'REASON_USER_END' }, e.custom)]), endReason: 'REASON_USER_END', endedAt: e.at };
    }),
    /** A user message: echoed with its message_id, and the language switched when it names a new one. */
    acceptMessage: assign(({ context, event }) => {
      const e = event as any;
      const echoed = echo(context, e, 'USER_MESSAGE', { text: e.text, message_id: `msg_${context.id}_${context.n + 1}` });
      const language = e.language && e.language !== context.language ? e.language : null;
      const after = { ...context, ...echoed };
      const switched = language ? emit(after, e.at, [ev('LANGUAGE_CHANGED', { language_code: language }, e.custom)]) : {};
      const askId = `${context.id}:m${context.n + 1}`;
      return { ...echoed, ...switched, language: language ?? context.language, queue: [...context.queue, { text: e.text, custom: e.custom, at: e.at, askId }] };
    }),
    takeNext: assign(({ context }) => {
      const [next, ...rest] = context.queue;
      return { current: next, queue: rest, ...emit(context, next.at, [ev('SERVICE_AGENT_THINKING', {}, next.custom, false)]) };
    }),
    answer: assign(({ context, event }) => {
      const r = (event as any).output as AgentReply;
      const custom = context.current?.custom ?? null;
      return { ...emit(context, r.at, agentMessage(context, r, custom)), current: null, idleDeadline: Math.max(context.idleDeadline, r.at + context.info!.idleMs) };
    }),
    agentFailure: assign(({ context, event }) => {
      const r = (event as any).output as AgentReply;
      return { ...emit(context, r.at, [system('ERROR', SESSION_ERRORS[r.failure!], context.current?.custom ?? null)]), current: null };
    }),
    joined: assign(({ context, event }) => {
      const r = (event as any).output as AgentReply;
      const custom = context.joinCustom;
      const events = [
        ev('SERVICE_AGENT_JOINED', { agent_name: r.agentName, agent_avatar_url: r.agentAvatarUrl }, custom),
        ev('SERVICE_AGENT_THINKING', {}, custom, false),
      ];
      const after = { ...context, ...emit(context, r.at, events) };
      return { ...after, ...emit(after, r.at, agentMessage(after, r, custom)), joined: true, joinFailed: false };
    }),
    joinFailure: assign(({ context, event }) => {
      const r = (event as any).output as AgentReply;
      return { ...emit(context, r.at, [system('ERROR', SESSION_ERRORS[r.failure === 'overload' ? 'overload' : 'start'], context.joinCustom)]), joinFailed: true };
    }),
    naturalEnd: assign(({ context, event }) => {
      const at = (event as any).output ?? (event as any).at ?? Date.now();
      const t = typeof at === 'number' ? at : (at as AgentReply).at;
      return { ...emit(context, t, [ev('SESSION_END', { reason: 'REASON_NATURAL_END' })]), endReason: 'REASON_NATURAL_END', endedAt: t };
    }),
    abandoned: assign(({ context, event }) => {
      const at = (event as any).output as number;
      return { ...emit(context, at, [ev('SESSION_END', { reason: 'REASON_USER_ABANDONED' })]), endReason: 'REASON_USER_ABANDONED', endedAt: at };
    }),
    handoffServer: assign(({ context, event }) => {
      const r = (event as any).output as AgentReply;
      const h = r.handoff!;
      const queue = { queue_name: h.destination, ...(r.queuePosition !== null ? { position_in_queue: r.queuePosition } : {}) };
      return {
        ...emit(context, r.at, [
          ev('SERVICE_AGENT_TRIGGERED_HANDOFF'),
          ev('SERVICE_AGENT_LEFT'),
          ev('HANDOFF_ACCEPTED'),
          ev('HANDOFF_QUEUE_STATUS', queue),
        ]),
        handoff: { ...h, mode: 'server', queuePosition: r.queuePosition, queuedAt: r.at },
        handoffDeadline: r.at + context.info!.handoffTimeoutMs,
        queueCheckAt: r.at + context.info!.queueStatusMs,
      };
    }),
    handoffClient: assign(({ context, event }) => {
      const r = (event as any).output as AgentReply;
      const h = r.handoff!;
      return {
        ...emit(context, r.at, [
          ev('SERVICE_AGENT_TRIGGERED_HANDOFF'),
          ev('CLIENT_HANDOFF_REQUIRED', { reason: clientHandoffReason(h.reason), queue_name: h.destination }),
          ev('SERVICE_AGENT_LEFT'),
        ]),
        handoff: { ...h, mode: 'client', queuePosition: null, queuedAt: null },
      };
    }),
    handoffFailed: assign(({ context, event }) => {
      const r = (event as any).output as AgentReply;
      return {
        ...emit(context, r.at, [ev('SERVICE_AGENT_TRIGGERED_HANDOFF'), ev('HANDOFF_FAILED'), system('ERROR', SESSION_ERRORS.handoffConnect)]),
        handoff: { ...r.handoff!, mode: 'failed', queuePosition: null, queuedAt: null },
      };
    }),
    handoffInvalid: assign(({ context, event }) => {
      const r = (event as any).output as AgentReply;
      return {
        ...emit(context, r.at, [ev('SERVICE_AGENT_TRIGGERED_HANDOFF'), ev('HANDOFF_FAILED'), system('ERROR', SESSION_ERRORS.handoffInit)]),
        handoff: { ...r.handoff!, mode: 'failed', queuePosition: null, queuedAt: null },
      };
    }),
    handoffTimeout: assign(({ context, event }) => {
      const at = (event as any).output as number;
      const after = { ...context, ...emit(context, at, [ev('HANDOFF_TIMEOUT')]) };
      return { ...after, ...emit(after, at, [ev('SESSION_END', { reason: 'REASON_NATURAL_END' })]), endReason: 'REASON_NATURAL_END', endedAt: at };
    }),
    /** A new place in the queue is announced; the same one is not repeated. */
    queueStatus: assign(({ context, event }) => {
      const { at, position } = (event as any).output as { at: number; position: number };
      const h = context.handoff!;
      const next = { queueCheckAt: at + context.info!.queueStatusMs };
      if (position === h.queuePosition) return next;
      return {
        ...next,
        ...emit(context, at, [ev('HANDOFF_QUEUE_STATUS', { queue_name: h.destination, position_in_queue: position })]),
        handoff: { ...h, queuePosition: position },
      };
    }),
    /** What the agent said outside a turn (an external event's function), as an agent message. */
    agentPush: assign(({ context, event }) => {
      const e = event as Extract<SessionEvent, { type: 'AGENT_PUSH' }>;
      const base = { ...context, ...trimmed(context) };
      const reply: AgentReply = {
        at: e.at, failure: null, text: e.text, suggestions: [], end: e.end, handoff: null, handoffMode: 'server', queuePosition: null, agentName: '', agentAvatarUrl: '',
      };
      const said = e.text === '' ? {} : emit(base, e.at, agentMessage(base, reply, null));
      return { ...external(context), ...said, idleDeadline: Math.max(context.idleDeadline, e.at + context.info!.idleMs) };
    }),
    liveJoined: assign(({ context, event }) => {
      const e = event as any;
      return { ...external(context), ...emit({ ...context, ...trimmed(context) }, e.at, [ev('LIVE_AGENT_JOINED', { agent: e.agent })]), liveAgent: e.agent, handoffDeadline: null, idleDeadline: e.at + context.info!.idleMs };
    }),
    liveTyping: assign(({ context, event }) => {
      const e = event as any;
      return { ...external(context), ...emit({ ...context, ...trimmed(context) }, e.at, [ev('LIVE_AGENT_TYPING', { state: e.state, agent_id: e.agentId }, null, false)]) };
    }),
    liveMessage: assign(({ context, event }) => {
      const e = event as any;
      const base = { ...context, ...trimmed(context) };
      const messageId = `msg_${context.id}_${base.n + 1}`;
      const payload = { message_id: messageId, text: e.text, attachments: [], response_suggestions: [], agent_id: e.agentId };
      return { ...external(context), ...emit(base, e.at, [ev('LIVE_AGENT_MESSAGE', payload)]), idleDeadline: e.at + context.info!.idleMs };
    }),
    liveLeft: assign(({ context, event }) => {
      const e = event as any;
      const base = { ...context, ...trimmed(context) };
      const after = { ...base, ...emit(base, e.at, [ev('LIVE_AGENT_LEFT')]) };
      return { ...external(context), ...emit(after, e.at, [ev('SESSION_END', { reason: 'REASON_NATURAL_END' })]), endReason: 'REASON_NATURAL_END', endedAt: e.at };
    }),
  },
}).createMachine({
  id: 'session',
  context: ({ input }) => ({
    id: input.id,
    info: null,
    n: 0,
    nextSeq: 1,
    outbox: [],
    mark: 0,
    connections: {},
    seen: [],
    joined: false,
    joinFailed: false,
    joinCustom: null,
    joinAt: null,
    language: '',
    queue: [],
    current: null,
    handoff: null,
    liveAgent: null,
    userTyping: '',
    idleDeadline: 0,
    handoffDeadline: null,
    queueCheckAt: null,
    endReason: null,
    endedAt: null,
    reply: null,
  }),
  initial: 'new',
  // Connections come and go in every state after creation.
  on: {
    DISCONNECT: {
      actions: assign(({ context, event }) => {
        const { [event.connectionId]: _gone, ...rest } = context.connections;
        return { ...external(context), connections: rest };
      }),
    },
  },
  states: {
    new: {
      on: {
        CREATE: {
          target: 'active',
          actions: assign(({ context, event }) => {
            const info = event.info;
            const base = { ...context, info, ...external(context) };
            return { ...base, ...emit(base, info.createdAt, [ev('SESSION_START', { capabilities: capabilities(info.streaming) })]), idleDeadline: info.createdAt + info.idleMs };
          }),
        },
        CONNECT: { actions: assign(({ context }) => external(context, { ok: false, error: 'not_found' })) },
        CLIENT: { actions: refuseClient(SESSION_ERRORS.sessionNotFound) },
        ...deskRefused,
        DISCONNECT: { actions: assign(({ context }) => external(context)) },
        AGENT_PUSH: { actions: assign(({ context }) => external(context, { ok: false, error: 'not_found' })) },
      },
    },
    active: {
      type: 'parallel',
      on: {
        CREATE: { actions: assign(({ context }) => external(context, { ok: false, error: 'exists' })) },
        CONNECT: [
          {
            guard: 'connectionAllowed',
            actions: assign(({ context, event }) => ({
              ...external(context),
              connections: {
                ...Object.fromEntries(Object.entries(context.connections).filter(([, c]) => counts(c, event))),
                [event.connectionId]: { gateway: event.gateway, until: event.at + context.info!.connectionTtlMs },
              },
              idleDeadline: Math.max(context.idleDeadline, event.at + context.info!.idleMs),
            })),
          },
          { actions: assign(({ context }) => external(context, { ok: false, error: 'limit' })) },
        ],
      },
      states: {
        idle: {
          initial: 'armed',
          states: {
            armed: {
              invoke: {
                id: 'idleTimer',
                src: 'sleepUntil',
                input: ({ context }) => ({ until: context.idleDeadline }),
                onDone: [
                  { guard: 'idleExpired', target: '#session.ending', actions: 'abandoned' },
                  // Activity moved the deadline on: sleep again until the new one.
                  { target: 'armed', reenter: true },
                ],
              },
            },
          },
        },
        agent: {
          initial: 'absent',
          // What every agent state does alike; the states below handle joins and user messages.
          on: {
            ...deskRefused,
            CLIENT: [
              { guard: 'duplicate', actions: 'replyDuplicate' },
              { guard: 'isEnd', target: '#session.ending', actions: 'endByUser' },
              { guard: 'isHeartbeat', actions: 'echoHeartbeat' },
              { guard: 'isTyping', actions: 'typing' },
              // A join after the agent joined (or while it joins): echoed, nothing more.
              { guard: 'isJoin', actions: assign(({ context, event }) => echo(context, event, 'REQUEST_SERVICE_AGENT_JOIN')) },
              { guard: 'isMessage', actions: refuseClient(SESSION_ERRORS.forward) },
            ],
            AGENT_PUSH: [
              { guard: ({ event }) => event.end, target: '#session.ending', actions: ['agentPush', 'naturalEnd'] },
              { actions: 'agentPush' },
            ],
          },
          states: {
            absent: {
              on: {
                CLIENT: [
                  {
                    guard: 'isJoin',
                    target: 'joining',
                    actions: assign(({ context, event }) => ({ ...echo(context, event, 'REQUEST_SERVICE_AGENT_JOIN'), joinCustom: event.custom, joinAt: event.at })),
                  },
                  { guard: ({ context, event }) => freshClient('MESSAGE')({ context, event }) && context.joinFailed, actions: refuseClient(SESSION_ERRORS.conversationIdNotFound) },
                  { guard: 'isMessage', actions: refuseClient(SESSION_ERRORS.conversationNotFound) },
                ],
              },
            },
            joining: {
              invoke: {
                id: 'start',
                src: 'startAgent',
                input: ({ context }) => ({ sessionId: context.id, info: context.info!, askId: `${context.id}:start`, at: context.joinAt ?? context.info!.createdAt }),
                onDone: [
                  { guard: 'agentFailed', target: 'absent', actions: 'joinFailure' },
                  { target: 'answered', actions: 'joined' },
                ],
                onError: { target: 'absent', actions: assign(({ context }) => ({ ...emit(context, Date.now(), [system('ERROR', SESSION_ERRORS.start, context.joinCustom)]), joinFailed: true })) },
              },
              on: { CLIENT: { guard: 'isMessage', actions: 'acceptMessage' } },
            },
            /** Decides what follows an answer: the end, a handoff, the next queued message, or waiting. */
            answered: {
              always: [{ guard: 'queued', target: 'responding', actions: 'takeNext' }, { target: 'ready' }],
            },
            ready: {
              on: { CLIENT: { guard: 'isMessage', target: 'responding', actions: ['acceptMessage', 'takeNext'] } },
            },
            responding: {
              invoke: {
                id: 'turn',
                src: 'converse',
                input: ({ context }) => ({
                  sessionId: context.id,
                  info: context.info!,
                  askId: context.current!.askId,
                  at: context.current!.at,
                  text: context.current!.text,
                  language: context.language,
                }),
                onDone: [
                  { guard: 'agentFailed', target: 'answered', actions: 'agentFailure' },
                  { guard: 'agentEnds', target: '#session.ending', actions: ['answer', 'naturalEnd'] },
                  { guard: 'serverHandoff', target: 'queuedForLive', actions: ['answer', 'handoffServer'] },
                  { guard: 'clientHandoff', target: 'clientHandoff', actions: ['answer', 'handoffClient'] },
                  { guard: 'failedHandoff', target: 'handoffFailed', actions: ['answer', 'handoffFailed'] },
                  { guard: 'invalidHandoff', target: 'handoffFailed', actions: ['answer', 'handoffInvalid'] },
                  { target: 'answered', actions: 'answer' },
                ],
                onError: {
                  target: 'answered',
                  actions: assign(({ context }) => ({ ...emit(context, Date.now(), [system('ERROR', SESSION_ERRORS.respond, context.current?.custom ?? null)]), current: null })),
                },
              },
              on: { CLIENT: { guard: 'isMessage', actions: 'acceptMessage' } },
            },
            /** Server-managed handoff: waiting on the live-agent desk. Messages are journaled for the agent who accepts. */
            queuedForLive: {
              invoke: {
                id: 'handoffTimer',
                src: 'sleepUntil',
                input: ({ context }) => ({ until: context.handoffDeadline! }),
                onDone: { target: '#session.ending', actions: 'handoffTimeout' },
              },
              initial: 'waiting',
              states: {
                waiting: {
                  invoke: { id: 'queueTimer', src: 'sleepUntil', input: ({ context }) => ({ until: context.queueCheckAt! }), onDone: 'checking' },
                },
                checking: {
                  invoke: {
                    id: 'queue',
                    src: 'queuePosition',
                    input: ({ context }) => ({ sessionId: context.id, accountId: context.info!.accountId, queuedAt: context.handoff!.queuedAt! }),
                    onDone: { target: 'waiting', actions: 'queueStatus' },
                    onError: { target: 'waiting', actions: assign(({ context }) => ({ queueCheckAt: Date.now() + context.info!.queueStatusMs })) },
                  },
                },
              },
              on: {
                CLIENT: { guard: 'isMessage', actions: assign(({ context, event }) => ({ ...echo(context, event, 'USER_MESSAGE', { text: event.text, message_id: `msg_${context.id}_${context.n + 1}` }) })) },
                DESK_ACCEPT: { target: 'live', actions: 'liveJoined' },
              },
            },
            live: {
              on: {
                CLIENT: { guard: 'isMessage', actions: assign(({ context, event }) => ({ ...echo(context, event, 'USER_MESSAGE', { text: event.text, message_id: `msg_${context.id}_${context.n + 1}` }) })) },
                DESK_ACCEPT: { actions: assign(({ context }) => external(context, { ok: false, error: 'not_waiting' })) },
                DESK_TYPING: [{ guard: 'isLiveAgent', actions: 'liveTyping' }, { actions: assign(({ context }) => external(context, { ok: false, error: 'not_agent' })) }],
                DESK_MESSAGE: [{ guard: 'isLiveAgent', actions: 'liveMessage' }, { actions: assign(({ context }) => external(context, { ok: false, error: 'not_agent' })) }],
                DESK_LEAVE: [{ guard: 'isLiveAgent', target: '#session.ending', actions: 'liveLeft' }, { actions: assign(({ context }) => external(context, { ok: false, error: 'not_agent' })) }],
              },
            },
            /** Client-managed handoff: the client routes the user elsewhere; nothing here forwards messages. */
            clientHandoff: {},
            handoffFailed: {},
          },
        },
      },
    },
    ending: {
      invoke: {
        id: 'close',
        src: 'closeConversation',
        input: ({ context }) => ({ sessionId: context.id, askId: `${context.id}:close`, at: context.endedAt ?? Date.now() }),
        onDone: 'ended',
        onError: 'ended',
      },
      on: {
        CONNECT: { actions: assign(({ context }) => external(context, { ok: false, error: 'not_found' })) },
        CLIENT: { actions: refuseClient(SESSION_ERRORS.sessionNotFound) },
        CREATE: { actions: assign(({ context }) => external(context, { ok: false, error: 'exists' })) },
        AGENT_PUSH: { actions: assign(({ context }) => external(context, { ok: false, error: 'not_found' })) },
        ...deskRefused,
      },
    },
    ended: {
      on: {
        CONNECT: { actions: assign(({ context }) => external(context, { ok: false, error: 'not_found' })) },
        CLIENT: { actions: refuseClient(SESSION_ERRORS.sessionNotFound) },
        CREATE: { actions: assign(({ context }) => external(context, { ok: false, error: 'exists' })) },
        AGENT_PUSH: { actions: assign(({ context }) => external(context, { ok: false, error: 'not_found' })) },
        ...deskRefused,
      },
    },
  },
});

/** The session's status as the records and the desk show it. */
export function sessionStatus(value: unknown): 'active' | 'waiting' | 'live' | 'ended' {
  if (value === 'ended' || value === 'ending') return 'ended';
  const region = (value as { active?: { agent?: string | Record<string, unknown> } })?.active?.agent;
  const agent = typeof region === 'string' ? region : region ? Object.keys(region)[0] : undefined;
  if (agent === 'queuedForLive') return 'waiting';
  if (agent === 'live') return 'live';
  return 'active';
}
