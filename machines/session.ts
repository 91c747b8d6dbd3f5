import { assign, enqueueActions, fromPromise, setup } from 'xstate';

/**
 * One Messaging API session (contract 2.9, 3.4, 4.7, 6.3; addendum "Messaging API"): its events, the agent
 * that joins on request and answers through the session's conversation, the live-agent handoff (server- or
 * client-managed), the sockets open on it across gateways, and idle expiry.
 *
 * The machine is pure. It emits semantic events (`session.*`, see `SessionEmitted`); the actor host commits
 * what a step emitted with its snapshot (the actor journal), and the session kind's wire module
 * (`actors/session/wire.ts`) renders committed events to the Messaging API's frames, replies included.
 * Events a client replays carry `seq`, their position in the session's sequence; the others (thinking,
 * typing, errors, refusals) carry none. Effects (starting the agent, closing the conversation, the handoff's
 * durable timers) are invoked actors named in `setup` and provided at run time, except a turn's: while the agent is
 * `responding` (tagged `turn`), the actor host runs it with `converseInput(context)` (`ActorKind.effect`) and
 * sends its reply back as `TURN_DONE`, or `TURN_FAILED`, as an invoked promise's done or error event would
 * come: a child actor created and stopped on every message cost more than the turn's own transitions. Idle
 * expiry is the host's too: while `active` (tagged `expires`), the host sends `IDLE_TIMEOUT` once `idleDeadline`
 * comes, and the session ends if the deadline has not moved on meanwhile (a child timer per session was a
 * third of the live actors of a busy gateway: bench/README.md, eighth session). Times come in events and in
 * effects' results.
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

/** Why the agent could not answer (the wire module picks the contract 7.4 message from it). */
export type AgentFailure = 'overload' | 'start' | 'respond' | 'stream';

/** What the agent effects answer: a reply, or why there is none. */
export interface AgentReply {
  at: number;
  /** Set when the agent could not answer. */
  failure: AgentFailure | null;
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
  /**
   * A join whose conversation started but whose agent could not greet (its responder failed): the agent joins,
   * and the client is told "unable to start" (contract 7.4) instead of a greeting; its messages are then taken.
   */
  greetingFailed?: boolean;
  /**
   * The session's conversation had ended when the message reached it (its own idle expiry, `CONVERSATION_IDLE_MS`,
   * while heartbeats kept the session alive): no agent will answer again, so the session ends with it.
   */
  conversationEnded?: boolean;
}

export interface LiveAgent {
  id: string;
  name: string;
  avatar_url: string;
}

/**
 * Why an external event was refused. The session kind's reply says it to the asker (`ok: false`), with the
 * contract's wording where a client sees it.
 */
export type Refusal =
  | 'not_found'
  | 'session_not_found'
  | 'conversation_not_found'
  | 'conversation_id_not_found'
  | 'forward'
  | 'limit'
  | 'exists'
  | 'not_waiting'
  | 'not_live'
  | 'not_agent';

/** Errors the session reports to the user (transient): an agent failure, or a handoff that cannot happen. */
export type SessionFailure = AgentFailure | 'handoff_connect' | 'handoff_init';

/** The client's `metadata.custom`, whatever JSON value it is (contract 6.3: echoed back); null when none was sent. */
type Custom = unknown;

/**
 * The semantic events a session emits. Every one carries the session's `account_id` and `project_id`
 * (null before creation). Those with `seq` are replayed to clients; `session.agent_message` occupies
 * `parts` positions from `seq` (a streamed reply is sent as that many chunks).
 */
export type SessionEmitted = { account_id: string | null; project_id: string | null } & (
  | {
      type: 'session.started';
      seq: number;
      connector_id: string;
      environment: string;
      variant_id: string | null;
      streaming: boolean;
      platform: string;
      user_agent: string;
      created_at: number;
    }
  | { type: 'session.join_requested'; seq: number; custom: Custom }
  | { type: 'session.heartbeat'; seq: number; custom: Custom }
  | { type: 'session.user_message'; seq: number; text: string; custom: Custom }
  | { type: 'session.user_ended'; seq: number; custom: Custom }
  | { type: 'session.typing'; state: string }
  | { type: 'session.language_changed'; seq: number; language: string; custom: Custom }
  | { type: 'session.agent_joined'; seq: number; agent_name: string; agent_avatar_url: string; custom: Custom }
  | { type: 'session.thinking'; custom: Custom }
  | { type: 'session.agent_message'; seq: number; parts: number; streamed: boolean; text: string; suggestions: string[]; custom: Custom }
  | { type: 'session.failure'; reason: SessionFailure; custom: Custom }
  | { type: 'session.handoff_triggered'; seq: number; destination: string; reason: string; mode: 'server' | 'client' | 'failed'; at: number; custom: Custom }
  | { type: 'session.agent_left'; seq: number; custom: Custom }
  | { type: 'session.handoff_accepted'; seq: number; custom: Custom }
  | { type: 'session.client_handoff_required'; seq: number; reason: string; destination: string; custom: Custom }
  | { type: 'session.handoff_failed'; seq: number; custom: Custom }
  | { type: 'session.queue_status'; seq: number; destination: string; position: number | null; custom: Custom }
  | { type: 'session.handoff_timeout'; seq: number }
  | { type: 'session.live_agent_joined'; seq: number; agent: LiveAgent }
  | { type: 'session.live_agent_typing'; agent_id: string; state: string }
  | { type: 'session.live_agent_message'; seq: number; agent_id: string; text: string }
  | { type: 'session.live_agent_left'; seq: number }
  | { type: 'session.ended'; seq: number; reason: string; at: number; custom: Custom }
  | { type: 'session.refused'; reason: Refusal }
  | { type: 'session.duplicate'; of: number }
);

/** A user message waiting for the agent. */
interface PendingMessage {
  text: string;
  custom: Custom;
  at: number;
  /** Idempotency key of the conversation ask (stable across restarts). */
  askId: string;
}

export interface SessionContext {
  id: string;
  info: SessionInfo | null;
  /** The next position in the session's sequence. */
  nextSeq: number;
  /**
   * Open connections: each one's gateway and the time it stops counting unless its gateway is alive
   * (gateways keep a heartbeat, and CONNECT carries the live ones). A list, not an object keyed by
   * connection id: the embedded store writes an object whose keys are ids as a plain map, every key spelled
   * out on every write, where a list of objects of one shape is written as records (`store/lmdb/shapes.ts`).
   */
  connections: OpenConnection[];
  /** The last `REMEMBERED_CLIENT_EVENTS` client_event_ids at least (as `SeenEvents` keeps them) with the sequence of their echo. */
  seen: SeenEvents;
  joinFailed: boolean;
  joinCustom: Custom;
  joinAt: number | null;
  language: string;
  queue: PendingMessage[];
  current: PendingMessage | null;
  handoff: { destination: string; reason: string; mode: string; queuePosition: number | null; queuedAt: number | null } | null;
  liveAgent: LiveAgent | null;
  idleDeadline: number;
  handoffDeadline: number | null;
  /** When the place in the live-agent queue is looked at next. */
  queueCheckAt: number | null;
  endedAt: number | null;
}

/** One open connection of a session. */
export interface OpenConnection {
  id: string;
  gateway: string;
  until: number;
}

/**
 * Whether a registered connection still counts toward the limit at a CONNECT: its gateway is alive (its
 * heartbeat is recent), or it was registered within the TTL (its gateway may be too new to be listed yet).
 */
function counts(c: OpenConnection, e: { at: number; liveGateways?: string[] }): boolean {
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
      custom: Custom;
      clientEventId: string | null;
      at: number;
    }
  | { type: 'DESK_ACCEPT'; agent: LiveAgent; at: number }
  | { type: 'DESK_TYPING'; agentId: string; state: string; at: number }
  | { type: 'DESK_MESSAGE'; agentId: string; text: string; at: number }
  | { type: 'DESK_LEAVE'; agentId: string; at: number }
  /**
   * The conversation's agent speaks without a user message: an external event's function said `text`, and maybe
   * ended the conversation or handed it off (`handoff`).
   */
  | { type: 'AGENT_PUSH'; text: string; end: boolean; handoff?: { destination: string; reason: string } | null; at: number }
  /** A turn's reply (the actor host runs the turn while the agent is `responding`, tagged `turn`). */
  | { type: 'TURN_DONE'; output: AgentReply }
  /** The turn failed: no reply came. */
  | { type: 'TURN_FAILED'; error: unknown }
  /** The idle deadline came (the actor host keeps it: `actors/session/kind.ts`); `at`: when it fired. */
  | { type: 'IDLE_TIMEOUT'; at: number };

export interface StartAgentInput {
  sessionId: string;
  info: SessionInfo;
  askId: string;
  at: number;
}
/** What deciding how a pushed handoff goes (`decideHandoff`) is run with: what the agent said, and the handoff. */
export interface PushedHandoffInput {
  info: SessionInfo;
  text: string;
  handoff: { destination: string; reason: string };
  at: number;
}
export interface ConverseInput extends StartAgentInput {
  text: string;
  language: string;
}
/** What the turn effect of a session whose agent is `responding` (tagged `turn`) is run with. */
export function converseInput(context: SessionContext): ConverseInput {
  return {
    sessionId: context.id,
    info: context.info!,
    askId: context.current!.askId,
    at: context.current!.at,
    text: context.current!.text,
    language: context.language,
  };
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
  /** Whether the agent was ever asked to join (only then is there a conversation to close). */
  started: boolean;
}

/** How many client_event_ids a session remembers for de-duplication at least (see `SeenEvents`). */
export const REMEMBERED_CLIENT_EVENTS = 100;

/**
 * Remembered client_event_ids, oldest first: each id's 53-bit hash as `SEEN_WIDTH` hex digits, concatenated,
 * and the sequence of its echo at the same position beside it. The snapshot of every step carries them: a
 * hundred ids of up to 256 characters each, as strings in pairs, were most of a session snapshot's size and its
 * encoding time; this is a string of fixed width. Two ids of one session colliding in 53 bits (which would
 * answer the later one as a duplicate) is a chance of about 1 in 10^14 per message.
 *
 * The newest (fewer than `SEEN_FOLD`) are kept apart (`newIds`, `newSeqs`) and folded into the rest every
 * `SEEN_FOLD` ids, the oldest beyond `REMEMBERED_CLIENT_EVENTS` dropped then: a message copies the few newest
 * and shares the rest with the step before. Copying all of them at every message made a new string and array of
 * about 2 KB that lived until the session's next message, past a young-generation collection, so every
 * scavenge copied them and promoted them to the old generation (bench/README.md, forty-fifth session). A session
 * remembers the last `REMEMBERED_CLIENT_EVENTS` ids at least, and up to `SEEN_FOLD - 1` more.
 */
export interface SeenEvents {
  ids: string;
  seqs: number[];
  newIds: string;
  newSeqs: number[];
}
const SEEN_WIDTH = 14;
/** How many newest ids are kept apart before they are folded into the rest (see `SeenEvents`). */
export const SEEN_FOLD = 20;

/** cyrb53 (a public-domain 53-bit string hash), as `SEEN_WIDTH` hex digits. */
function seenHash(id: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < id.length; i++) {
    const ch = id.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16).padStart(SEEN_WIDTH, '0');
}

/** The position of hash `h` among the fixed-width hashes `ids`, or -1. */
function positionOf(ids: string, h: string): number {
  for (let at = ids.indexOf(h); at !== -1; at = ids.indexOf(h, at + 1)) if (at % SEEN_WIDTH === 0) return at / SEEN_WIDTH;
  return -1;
}

/** The sequence of the echo of `id` when it is remembered, or undefined. */
export function seenSeq(seen: SeenEvents, id: string): number | undefined {
  const h = seenHash(id);
  const at = positionOf(seen.newIds, h);
  if (at !== -1) return seen.newSeqs[at];
  const old = positionOf(seen.ids, h);
  return old === -1 ? undefined : seen.seqs[old];
}

/** `seen` with `id` (echoed at `seq`) remembered (see `SeenEvents`: the newest apart, folded every `SEEN_FOLD`). */
function remembered(seen: SeenEvents, id: string, seq: number): SeenEvents {
  const newIds = seen.newIds + seenHash(id);
  const newSeqs = [...seen.newSeqs, seq];
  if (newSeqs.length < SEEN_FOLD) return { ids: seen.ids, seqs: seen.seqs, newIds, newSeqs };
  const seqs = [...seen.seqs, ...newSeqs];
  const drop = Math.max(0, seqs.length - REMEMBERED_CLIENT_EVENTS);
  return { ids: (seen.ids + newIds).slice(drop * SEEN_WIDTH), seqs: drop ? seqs.slice(drop) : seqs, newIds: '', newSeqs: [] };
}

/** A streamed reply is sent in at most this many parts. */
export const MAX_CHUNKS = 32;

/** How long after its end an ending session's snapshot is due to be woken, should its close not have finished. */
export const CLOSE_RESUME_MS = 5_000;

/**
 * How many parts a streamed reply of `text` is sent in: one per word, at most MAX_CHUNKS (one for a text
 * without words). Each part takes a position in the session's sequence, so the machine reserves them.
 */
export function streamedParts(text: string): number {
  let words = 0;
  for (const _ of text.matchAll(/\S+/g)) if (++words >= MAX_CHUNKS) break;
  return Math.max(1, words);
}

/** What a step emits before `seq`, `account_id` and `project_id` are filled in. */
type Draft = { type: string; journaled?: boolean; parts?: number; [k: string]: unknown };
/** What a step does: context changes and events, in order. */
type Step = { set?: Partial<SessionContext>; out?: Draft[] };

const j = (type: string, fields: Record<string, unknown> = {}): Draft => ({ type, journaled: true, ...fields });
const transient = (type: string, fields: Record<string, unknown> = {}): Draft => ({ type, journaled: false, ...fields });
const refused = (reason: Refusal): Step => ({ out: [transient('session.refused', { reason })] });

/**
 * Applies a step: journaled events get the next positions of the sequence (an agent message as many as its
 * parts), every event the session's account and project.
 */
function apply(context: SessionContext, s: Step): { set: Partial<SessionContext>; emitted: SessionEmitted[] } {
  let nextSeq = s.set?.nextSeq ?? context.nextSeq;
  const info = s.set?.info ?? context.info;
  const emitted = (s.out ?? []).map(({ journaled, ...d }) => {
    const e = { account_id: info?.accountId ?? null, project_id: info?.projectId ?? null, ...d } as Record<string, unknown>;
    if (journaled) {
      e.seq = nextSeq;
      nextSeq += typeof d.parts === 'number' ? d.parts : 1;
    }
    return e as SessionEmitted;
  });
  return { set: { ...s.set, nextSeq }, emitted };
}

/** An action from a step function: one assign, then the step's events. */
const step = <P = undefined>(f: (context: SessionContext, event: any, params: P) => Step) =>
  enqueueActions(({ context, event, enqueue }, params: P) => {
    const { set, emitted } = apply(context as SessionContext, f(context as SessionContext, event, params));
    enqueue.assign(set);
    for (const e of emitted) enqueue.emit(e as never);
  }) as any; // typed by `setup` where it is used (the generic action type does not narrow to this machine's)

/** The agent's reply as one message (streamed: in parts sharing one message). */
const agentMessage = (c: SessionContext, text: string, suggestions: string[], custom: Custom): Draft => {
  const streamed = c.info!.streaming;
  return j('session.agent_message', { parts: streamed ? streamedParts(text) : 1, streamed, text, suggestions, custom });
};

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
  DESK_ACCEPT: { actions: { type: 'refuse', params: 'not_waiting' } },
  DESK_TYPING: { actions: { type: 'refuse', params: 'not_live' } },
  DESK_MESSAGE: { actions: { type: 'refuse', params: 'not_live' } },
  DESK_LEAVE: { actions: { type: 'refuse', params: 'not_live' } },
} as const;

/** An agent's reply that hands the conversation off: the reply, then the handoff as the project's mode decided it. */
const HANDED_OFF = [
  { guard: 'serverHandoff', target: 'queuedForLive', actions: ['answer', 'handoffServer'] },
  { guard: 'clientHandoff', target: 'clientHandoff', actions: ['answer', 'handoffClient'] },
  { guard: 'failedHandoff', target: '#session.ending', actions: ['answer', 'handoffFailed'] },
  { guard: 'invalidHandoff', target: '#session.ending', actions: ['answer', 'handoffFailed'] },
] as const;

/**
 * What follows an agent's reply (a turn's, or a handoff an external event's function made) in the agent's
 * states: the reply, then the handoff, or the next message (`answered` decides).
 */
const ANSWERED = [...HANDED_OFF, { target: 'answered', actions: 'answer' }] as const;

/** What a session that is over (or not yet created) answers. */
const closedRefusals = {
  CONNECT: { actions: { type: 'refuse', params: 'not_found' } },
  CLIENT: { actions: { type: 'refuse', params: 'session_not_found' } },
  CREATE: { actions: { type: 'refuse', params: 'exists' } },
  AGENT_PUSH: { actions: { type: 'refuse', params: 'not_found' } },
  ...deskRefused,
} as const;

const notProvided = () => {
  throw new Error('provided by the actor host');
};

type Ctx = { context: SessionContext; event: any };
const isClient = (kind: ClientKind) => ({ event }: Ctx) => event.type === 'CLIENT' && event.kind === kind;
const duplicate = ({ context, event }: Ctx) => event.clientEventId != null && seenSeq(context.seen, event.clientEventId) !== undefined;
const freshClient = (kind: ClientKind) => (a: Ctx) => isClient(kind)(a) && !duplicate(a);

/** A client event's echo (journaled), remembering its client_event_id; activity moves the idle deadline. */
const echo = (c: SessionContext, e: any, type: string, fields: Record<string, unknown> = {}): Step => {
  const seq = c.nextSeq;
  const seen = e.clientEventId ? remembered(c.seen, e.clientEventId, seq) : c.seen;
  return { set: { seen, idleDeadline: e.at + c.info!.idleMs }, out: [j(type, { custom: e.custom, ...fields })] };
};

/** Steps one after the other in one action (their journaled events take consecutive positions). */
const seqSteps = (...steps: Step[]): Step => ({
  set: Object.assign({}, ...steps.map((s) => s.set ?? {})),
  out: steps.flatMap((s) => s.out ?? []),
});

/** A user message accepted: echoed, the language switched when it names a new one; and the message as the agent takes it. */
const accepted = (c: SessionContext, e: any): { step: Step; message: PendingMessage } => {
  const language = e.language && e.language !== c.language ? e.language : null;
  const message: PendingMessage = { text: e.text, custom: e.custom, at: e.at, askId: `${c.id}:m${c.nextSeq}` };
  return {
    step: seqSteps(
      echo(c, e, 'session.user_message', { text: e.text }),
      language ? { set: { language }, out: [j('session.language_changed', { language, custom: e.custom })] } : {},
    ),
    message,
  };
};

/** The `custom` of the user message the agent is answering (null: none is, or it carried none). */
const answering = (c: SessionContext): Custom => c.current?.custom ?? null;

const ended = (reason: string, at: number, custom: Custom = null): Step => ({
  set: { endedAt: at },
  out: [j('session.ended', { reason, at, custom })],
});

export const sessionMachine = setup({
  types: {} as { context: SessionContext; events: SessionEvent; input: { id: string }; emitted: SessionEmitted },
  actors: {
    startAgent: fromPromise<AgentReply, StartAgentInput>(notProvided),
    closeConversation: fromPromise<number, CloseInput>(notProvided),
    queuePosition: fromPromise<{ at: number; position: number }, QueueInput>(notProvided),
    decideHandoff: fromPromise<AgentReply, PushedHandoffInput>(notProvided),
    sleepUntil: fromPromise<number, { until: number }>(notProvided),
  },
  guards: {
    /** The idle deadline has passed by the time the timeout is handled (activity since may have moved it on). */
    idleDeadlinePassed: ({ context, event }) => event.type === 'IDLE_TIMEOUT' && event.at >= context.idleDeadline,
    duplicate: ({ context, event }) => duplicate({ context, event }),
    isJoin: ({ context, event }) => freshClient('JOIN')({ context, event }),
    isMessage: ({ context, event }) => freshClient('MESSAGE')({ context, event }),
    isTyping: ({ context, event }) => isClient('TYPING')({ context, event }),
    isEnd: ({ context, event }) => freshClient('END')({ context, event }),
    isHeartbeat: ({ context, event }) => freshClient('HEARTBEAT')({ context, event }),
    joinFailed: ({ context }) => context.joinFailed,
    agentFailed: ({ event }) => (event as any).output.failure !== null,
    conversationEnded: ({ event }) => (event as any).output.conversationEnded === true,
    agentEnds: ({ event }) => (event as any).output.end,
    serverHandoff: ({ event }) => (event as any).output.handoff !== null && (event as any).output.handoffMode === 'server',
    clientHandoff: ({ event }) => (event as any).output.handoff !== null && (event as any).output.handoffMode === 'client',
    failedHandoff: ({ event }) => (event as any).output.handoff !== null && (event as any).output.handoffMode === 'unavailable',
    invalidHandoff: ({ event }) => (event as any).output.handoff !== null && (event as any).output.handoffMode === 'invalid',
    queued: ({ context }) => context.queue.length > 0,
    isLiveAgent: ({ context, event }) => context.liveAgent?.id === (event as any).agentId,
    connectionAllowed: ({ context, event }) => {
      const e = event as Extract<SessionEvent, { type: 'CONNECT' }>;
      const live = context.connections.filter((x) => counts(x, e)).length;
      return live < context.info!.maxConnections;
    },
  },
  actions: {
    refuse: step<Refusal>((_c, _e, reason) => refused(reason)),
    replyDuplicate: step((c, e) => ({ out: [transient('session.duplicate', { of: seenSeq(c.seen, e.clientEventId)! })] })),
    echoHeartbeat: step((c, e) => echo(c, e, 'session.heartbeat')),
    echoJoin: step((c, e) => echo(c, e, 'session.join_requested')),
    typing: step((c, e) => ({ set: { idleDeadline: e.at + c.info!.idleMs }, out: [transient('session.typing', { state: e.typing ?? '' })] })),
    endByUser: step((c, e) => seqSteps(echo(c, e, 'session.user_ended'), ended('REASON_USER_END', e.at, e.custom))),
    /** A user message while the agent is busy: accepted and queued. */
    acceptMessage: step((c, e) => {
      const { step: accepting, message } = accepted(c, e);
      return seqSteps(accepting, { set: { queue: [...c.queue, message] } });
    }),
    /**
     * A user message to an agent that is ready: accepted and answered at once, as `acceptMessage` then
     * `takeNext` would, in one context update (each action's update copies the whole context).
     */
    startTurn: step((c, e) => {
      const { step: accepting, message } = accepted(c, e);
      return seqSteps(accepting, { set: { current: message }, out: [transient('session.thinking', { custom: message.custom })] });
    }),
    /** A user message while a live agent has (or will have) the session: journaled for them. */
    forwardMessage: step((c, e) => echo(c, e, 'session.user_message', { text: e.text })),
    takeNext: step((c) => {
      const [next, ...rest] = c.queue;
      return { set: { current: next, queue: rest }, out: [transient('session.thinking', { custom: next.custom })] };
    }),
    answer: step((c, e) => {
      const r = e.output as AgentReply;
      // A reply that ends the session or hands it off is followed by that step, which answers the same message
      // (it echoes its `custom`, contract 2.9) and lets it go.
      const goesOn = r.end || r.handoff !== null;
      // A pushed handoff (no user message to answer) whose function said nothing has no message to send.
      const silent = r.text === '' && c.current === null;
      return {
        set: { current: goesOn ? c.current : null, idleDeadline: Math.max(c.idleDeadline, r.at + c.info!.idleMs) },
        out: silent ? [] : [agentMessage(c, r.text, r.suggestions, answering(c))],
      };
    }),
    agentFailure: step((c, e) => {
      const r = e.output as AgentReply;
      return { set: { current: null }, out: [transient('session.failure', { reason: r.failure, custom: c.current?.custom ?? null })] };
    }),
    turnError: step((c) => ({ set: { current: null }, out: [transient('session.failure', { reason: 'respond', custom: c.current?.custom ?? null })] })),
    joined: step((c, e) => {
      const r = e.output as AgentReply;
      const custom = c.joinCustom;
      const joinedEvent = j('session.agent_joined', { agent_name: r.agentName, agent_avatar_url: r.agentAvatarUrl, custom });
      if (r.greetingFailed) return { set: { joinFailed: false }, out: [joinedEvent, transient('session.failure', { reason: 'start', custom })] };
      return {
        set: { joinFailed: false },
        out: [joinedEvent, transient('session.thinking', { custom }), agentMessage(c, r.text, r.suggestions, custom)],
      };
    }),
    joinFailure: step((c, e) => {
      const r = e.output as AgentReply;
      return { set: { joinFailed: true }, out: [transient('session.failure', { reason: r.failure === 'overload' ? 'overload' : 'start', custom: c.joinCustom })] };
    }),
    joinError: step((c) => ({ set: { joinFailed: true }, out: [transient('session.failure', { reason: 'start', custom: c.joinCustom })] })),
    naturalEnd: step((c, e) => {
      const at = typeof e.output === 'object' && e.output !== null ? (e.output as AgentReply).at : (e.at as number);
      return seqSteps({ set: { current: null } }, ended('REASON_NATURAL_END', at, answering(c)));
    }),
    abandoned: step((_c, e) => ended('REASON_USER_ABANDONED', e.at as number)),
    /** The conversation expired under the session (idle, with only heartbeats since): abandoned, as idle expiry is. */
    conversationGone: step((c, e) => seqSteps({ set: { current: null } }, ended('REASON_USER_ABANDONED', (e.output as AgentReply).at, answering(c)))),
    handoffServer: step((c, e) => {
      const r = e.output as AgentReply;
      const h = r.handoff!;
      const custom = answering(c);
      return {
        set: {
          current: null,
          handoff: { destination: h.destination, reason: h.reason, mode: 'server', queuePosition: r.queuePosition, queuedAt: r.at },
          handoffDeadline: r.at + c.info!.handoffTimeoutMs,
          queueCheckAt: r.at + c.info!.queueStatusMs,
        },
        out: [
          j('session.handoff_triggered', { destination: h.destination, reason: h.reason, mode: 'server', at: r.at, custom }),
          j('session.agent_left', { custom }),
          j('session.handoff_accepted', { custom }),
          j('session.queue_status', { destination: h.destination, position: r.queuePosition, custom }),
        ],
      };
    }),
    handoffClient: step((c, e) => {
      const r = e.output as AgentReply;
      const h = r.handoff!;
      const custom = answering(c);
      return {
        set: { current: null, handoff: { destination: h.destination, reason: h.reason, mode: 'client', queuePosition: null, queuedAt: null } },
        out: [
          j('session.handoff_triggered', { destination: h.destination, reason: h.reason, mode: 'client', at: r.at, custom }),
          j('session.client_handoff_required', { reason: clientHandoffReason(h.reason), destination: h.destination, custom }),
          j('session.agent_left', { custom }),
        ],
      };
    }),
    /**
     * No live agent can take the conversation, and the agent has handed it off: the session ends after the
     * error (contract 6.3, "some errors are followed by SESSION_END"), rather than refusing every later message.
     */
    handoffFailed: step((c, e) => {
      const r = e.output as AgentReply;
      const custom = answering(c);
      return seqSteps(
        {
          set: { current: null, handoff: { destination: r.handoff!.destination, reason: r.handoff!.reason, mode: 'failed', queuePosition: null, queuedAt: null } },
          out: [
            j('session.handoff_triggered', { destination: r.handoff!.destination, reason: r.handoff!.reason, mode: 'failed', at: r.at, custom }),
            j('session.handoff_failed', { custom }),
            transient('session.failure', { reason: r.handoffMode === 'invalid' ? 'handoff_init' : 'handoff_connect', custom }),
          ],
        },
        ended('REASON_NATURAL_END', r.at, custom),
      );
    }),
    handoffTimeout: step((_c, e) => {
      const at = e.output as number;
      return seqSteps({ out: [j('session.handoff_timeout')] }, ended('REASON_NATURAL_END', at));
    }),
    /** A new place in the queue is announced; the same one is not repeated. */
    queueStatus: step((c, e) => {
      const { at, position } = e.output as { at: number; position: number };
      const h = c.handoff!;
      const next = { queueCheckAt: at + c.info!.queueStatusMs };
      if (position === h.queuePosition) return { set: next };
      return { set: { handoff: { ...h, queuePosition: position }, ...next }, out: [j('session.queue_status', { destination: h.destination, position, custom: null })] };
    }),
    /** What the agent said outside a turn (an external event's function), as an agent message. */
    agentPush: step((c, e) => ({
      set: { idleDeadline: Math.max(c.idleDeadline, e.at + c.info!.idleMs) },
      out: e.text === '' ? [] : [agentMessage(c, e.text, [], null)],
    })),
    liveJoined: step((c, e) => ({
      set: { liveAgent: e.agent, handoffDeadline: null, idleDeadline: e.at + c.info!.idleMs },
      out: [j('session.live_agent_joined', { agent: e.agent })],
    })),
    liveTyping: step((_c, e) => ({ out: [transient('session.live_agent_typing', { agent_id: e.agentId, state: e.state })] })),
    liveMessage: step((c, e) => ({
      set: { idleDeadline: e.at + c.info!.idleMs },
      out: [j('session.live_agent_message', { agent_id: e.agentId, text: e.text })],
    })),
    liveLeft: step((_c, e) => seqSteps({ out: [j('session.live_agent_left')] }, ended('REASON_NATURAL_END', e.at))),
  },
}).createMachine({
  id: 'session',
  context: ({ input }) => ({
    id: input.id,
    info: null,
    nextSeq: 1,
    connections: [],
    seen: { ids: '', seqs: [], newIds: '', newSeqs: [] },
    joinFailed: false,
    joinCustom: null,
    joinAt: null,
    language: '',
    queue: [],
    current: null,
    handoff: null,
    liveAgent: null,
    idleDeadline: 0,
    handoffDeadline: null,
    queueCheckAt: null,
    endedAt: null,
  }),
  initial: 'new',
  // Connections come and go in every state after creation.
  on: {
    DISCONNECT: {
      actions: assign(({ context, event }) => ({ connections: context.connections.filter((c) => c.id !== event.connectionId) })),
    },
  },
  states: {
    new: {
      on: {
        ...closedRefusals,
        CREATE: {
          target: 'active',
          actions: step((_c, e) => {
            const info = e.info as SessionInfo;
            return {
              set: { info, idleDeadline: info.createdAt + info.idleMs },
              out: [
                j('session.started', {
                  connector_id: info.connectorId,
                  environment: info.environment,
                  variant_id: info.variantId,
                  streaming: info.streaming,
                  platform: info.platform,
                  user_agent: info.userAgent,
                  created_at: info.createdAt,
                }),
              ],
            };
          }),
        },
      },
    },
    active: {
      // The idle expiry: while `expires`, the actor host sends IDLE_TIMEOUT when `idleDeadline` comes (a
      // deadline it keeps and stores, instead of a durable timer invoked as a child of every session).
      tags: ['expires'],
      initial: 'agent',
      on: {
        IDLE_TIMEOUT: { guard: 'idleDeadlinePassed', target: '#session.ending', actions: 'abandoned' },
        CREATE: { actions: { type: 'refuse', params: 'exists' } },
        CONNECT: [
          {
            guard: 'connectionAllowed',
            actions: assign(({ context, event }) => ({
              connections: [
                ...context.connections.filter((c) => c.id !== event.connectionId && counts(c, event)),
                { id: event.connectionId, gateway: event.gateway, until: event.at + context.info!.connectionTtlMs },
              ],
              idleDeadline: Math.max(context.idleDeadline, event.at + context.info!.idleMs),
            })),
          },
          { actions: { type: 'refuse', params: 'limit' } },
        ],
      },
      states: {
        agent: {
          initial: 'absent',
          // What every agent state does alike; the states below handle joins and user messages.
          on: {
            CLIENT: [
              { guard: 'duplicate', actions: 'replyDuplicate' },
              { guard: 'isEnd', target: '#session.ending', actions: 'endByUser' },
              { guard: 'isHeartbeat', actions: 'echoHeartbeat' },
              { guard: 'isTyping', actions: 'typing' },
              // A join after the agent joined (or while it joins): echoed, nothing more.
              { guard: 'isJoin', actions: 'echoJoin' },
              { guard: 'isMessage', actions: { type: 'refuse', params: 'forward' } },
            ],
            AGENT_PUSH: [
              // Handed off by an external event's function: decided and announced as a turn's handoff is.
              { guard: ({ context, event }) => !!event.handoff && context.handoff === null && !event.end, target: '.pushedHandoff' },
              { guard: ({ event }) => event.end, target: '#session.ending', actions: ['agentPush', 'naturalEnd'] },
              { actions: 'agentPush' },
            ],
            ...deskRefused,
          },
          states: {
            absent: {
              on: {
                CLIENT: [
                  {
                    guard: 'isJoin',
                    target: 'joining',
                    actions: ['echoJoin', assign(({ event }) => ({ joinCustom: event.custom, joinAt: event.at }))],
                  },
                  { guard: ({ context, event }) => freshClient('MESSAGE')({ context, event }) && context.joinFailed, actions: { type: 'refuse', params: 'conversation_id_not_found' } },
                  { guard: 'isMessage', actions: { type: 'refuse', params: 'conversation_not_found' } },
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
                onError: { target: 'absent', actions: 'joinError' },
              },
              on: { CLIENT: { guard: 'isMessage', actions: 'acceptMessage' } },
            },
            /**
             * An external event's function handed the conversation off: how the handoff goes is decided (the
             * project's handoff mode, a live-agent desk) and announced, after what the function said, as for a turn.
             */
            pushedHandoff: {
              invoke: {
                id: 'pushedHandoff',
                src: 'decideHandoff',
                input: ({ context, event }) => {
                  const push = event as Extract<SessionEvent, { type: 'AGENT_PUSH' }>;
                  return { info: context.info!, text: push.text, handoff: push.handoff!, at: push.at };
                },
                onDone: [...ANSWERED],
                onError: { target: 'answered', actions: 'turnError' },
              },
              on: { CLIENT: { guard: 'isMessage', actions: 'acceptMessage' } },
            },
            /** Decides what follows an answer: the next queued message, or waiting. */
            answered: {
              always: [{ guard: 'queued', target: 'responding', actions: 'takeNext' }, { target: 'ready' }],
            },
            ready: {
              on: { CLIENT: { guard: 'isMessage', target: 'responding', actions: 'startTurn' } },
            },
            /** The turn runs (the host's effect, see above) until its reply, or its failure, comes back. */
            responding: {
              tags: ['turn'],
              // For the chart (`gateway/edge/inspector`): what the host runs here.
              meta: { hostEffect: 'converse' },
              on: {
                TURN_DONE: [
                  { guard: 'conversationEnded', target: '#session.ending', actions: 'conversationGone' },
                  { guard: 'agentFailed', target: 'answered', actions: 'agentFailure' },
                  { guard: 'agentEnds', target: '#session.ending', actions: ['answer', 'naturalEnd'] },
                  ...HANDED_OFF,
                  // As `answered` decides, without the step through it: a microstep of its own recomputes XState's
                  // sets of state nodes, a sixth of what a message's transitions allocate (bench/README.md, fortieth session).
                  { guard: 'queued', target: 'responding', actions: ['answer', 'takeNext'] },
                  { target: 'ready', actions: 'answer' },
                ],
                TURN_FAILED: { target: 'answered', actions: 'turnError' },
                CLIENT: { guard: 'isMessage', actions: 'acceptMessage' },
              },
            },
            /** Server-managed handoff: waiting on the live-agent desk. Messages are journaled for the agent who accepts. */
            queuedForLive: {
              tags: ['waiting'],
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
                    // No clock here: the next look is one period after the one that failed was due.
                    onError: { target: 'waiting', actions: assign(({ context }) => ({ queueCheckAt: context.queueCheckAt! + context.info!.queueStatusMs })) },
                  },
                },
              },
              on: {
                CLIENT: { guard: 'isMessage', actions: 'forwardMessage' },
                DESK_ACCEPT: { target: 'live', actions: 'liveJoined' },
              },
            },
            live: {
              tags: ['live'],
              on: {
                CLIENT: { guard: 'isMessage', actions: 'forwardMessage' },
                DESK_ACCEPT: { actions: { type: 'refuse', params: 'not_waiting' } },
                DESK_TYPING: [{ guard: 'isLiveAgent', actions: 'liveTyping' }, { actions: { type: 'refuse', params: 'not_agent' } }],
                DESK_MESSAGE: [{ guard: 'isLiveAgent', actions: 'liveMessage' }, { actions: { type: 'refuse', params: 'not_agent' } }],
                DESK_LEAVE: [{ guard: 'isLiveAgent', target: '#session.ending', actions: 'liveLeft' }, { actions: { type: 'refuse', params: 'not_agent' } }],
              },
            },
            /** Client-managed handoff: the client routes the user elsewhere; nothing here forwards messages. */
            clientHandoff: {},
          },
        },
      },
    },
    ending: {
      tags: ['ended'],
      invoke: [
        {
          id: 'close',
          src: 'closeConversation',
          input: ({ context }) => ({ sessionId: context.id, askId: `${context.id}:close`, at: context.endedAt!, started: context.joinAt !== null }),
          onDone: 'ended',
          onError: 'ended',
        },
        // Nothing else wakes a session once it has ended: if its owner dies while the close runs, this durable
        // timer has the host restore it (restarting the close, which is idempotent by its ask id) instead of
        // leaving it, and its conversation, open until a client happens to touch it. Its firing changes nothing.
        { id: 'closeWake', src: 'sleepUntil', input: ({ context }) => ({ until: context.endedAt! + CLOSE_RESUME_MS }) },
      ],
      on: closedRefusals,
    },
    ended: {
      tags: ['ended'],
      on: closedRefusals,
    },
  },
});
