import { assign, fromPromise, setup } from 'xstate';

/**
 * One conversation on any channel (chat, webchat, voice): started, then idle between turns, a turn in
 * progress, handed off, ended. Every side effect (running the deployment's functions, asking the responder)
 * is an invoked actor named here and provided by `actors/conversation` at run time; an idle conversation
 * ends by itself through the durable `sleepUntil` timer.
 */

/** One exchange, as the conversation record (contract 2.5) stores it. */
export interface TurnRecord {
  user_input: string;
  user_input_dtmf: string;
  user_input_datetime: string;
  barge_in: boolean;
  agent_response: string;
  agent_response_datetime: string;
  /** Seconds from receiving the input to having the response. */
  latency: number;
  translated_user_input: string;
  english_agent_response: string;
  intents: string[];
  entities: Record<string, string>;
  is_ood: boolean;
  is_silence: boolean;
  /** The message's metadata, as the caller sent it. */
  metadata: Record<string, unknown>;
}

export interface Handoff {
  destination: string;
  reason: string;
}

/** What a client asked for when it started the conversation. */
export interface ConversationStart {
  accountId: string;
  projectId: string;
  environment: string;
  /** Analytics label: `CHAT`, `WEBCHAT`, `SMS`, `WHATSAPP`, `API`, `VOICE-SIP`. */
  channel: string;
  variantId: string | null;
  integrationAttributes: Record<string, unknown>;
  asrLangCode: string;
  ttsLangCode: string;
  initialMessage: string | null;
  fromNumber: string;
  toNumber: string;
  /** When the client's request arrived (ms since epoch). */
  at: number;
  /** An idle conversation ends this long after its last turn. */
  idleTimeoutMs: number;
}

/** The outcome of running the start effect or one turn. */
export interface TurnOutcome {
  /** When the effect finished (ms since epoch). */
  at: number;
  turns: TurnRecord[];
  /** The text answered to the client (the reply to the last input). */
  response: string;
  state: Record<string, unknown>;
  handoff: Handoff | null;
  end: boolean;
  oodTurns: number;
  functionErrors: number;
  variant: { id: string; name: string } | null;
  artifactVersion: string | null;
}

/** The answer to the last event, which the host sends back to the asker. */
export type Outcome =
  | { ok: true; response: string; end: boolean; handoff: Handoff | null }
  | { ok: false; error: 'not_started' | 'ended' | 'handed_off' | 'started' };

export interface ConversationContext {
  id: string;
  start: ConversationStart | null;
  variant: { id: string; name: string } | null;
  artifactVersion: string | null;
  startedAt: number | null;
  endedAt: number | null;
  /** Conversation variables (`conv.state`), persisted across turns. */
  state: Record<string, unknown>;
  integrationAttributes: Record<string, unknown>;
  asrLangCode: string;
  ttsLangCode: string;
  turns: TurnRecord[];
  numOod: number;
  functionErrors: number;
  handoff: Handoff | null;
  /** The user message of the turn in progress. */
  pending: { message: string; metadata: Record<string, unknown>; at: number } | null;
  idleDeadline: number | null;
  endReason: 'closed' | 'agent' | 'idle' | null;
  outcome: Outcome | null;
}

export type ConversationEvent =
  | { type: 'START'; start: ConversationStart }
  | {
      type: 'MESSAGE';
      message: string;
      metadata: Record<string, unknown>;
      integrationAttributes: Record<string, unknown>;
      asrLangCode?: string;
      ttsLangCode?: string;
      at: number;
    }
  | { type: 'CLOSE'; at: number };

/** What the start effect needs. */
export interface StartInput {
  id: string;
  start: ConversationStart;
  state: Record<string, unknown>;
}

/** What the end effect needs: the conversation as it stands. */
export interface EndInput {
  id: string;
  start: ConversationStart;
  /** The artifact the conversation started on: it runs that one to the end (null: main's draft). */
  artifactVersion: string | null;
  variant: { id: string; name: string } | null;
  state: Record<string, unknown>;
  integrationAttributes: Record<string, unknown>;
}

/** What a turn effect needs: the conversation, its history and the new message. */
export interface TurnInput extends EndInput {
  history: Array<{ role: 'user' | 'agent'; text: string }>;
  message: string;
  metadata: Record<string, unknown>;
  at: number;
}

const notProvided = () => {
  throw new Error('provided by the actor host');
};

const history = (turns: TurnRecord[]) =>
  turns.flatMap((t) => [
    ...(t.user_input ? [{ role: 'user' as const, text: t.user_input }] : []),
    ...(t.agent_response ? [{ role: 'agent' as const, text: t.agent_response }] : []),
  ]);

const endInput = (c: ConversationContext): EndInput => ({
  id: c.id,
  start: c.start!,
  artifactVersion: c.artifactVersion,
  variant: c.variant,
  state: c.state,
  integrationAttributes: c.integrationAttributes,
});

/** After the start effect or a turn: to ending, handed off or idle, with the outcome applied. */
const afterOutcome = [
  { guard: { type: 'ends', params: ({ event }: { event: { output: TurnOutcome } }) => event.output }, target: 'ending', actions: { type: 'applyOutcome', params: ({ event }: { event: { output: TurnOutcome } }) => event.output } },
  { guard: { type: 'handsOff', params: ({ event }: { event: { output: TurnOutcome } }) => event.output }, target: 'handedOff', actions: { type: 'applyOutcome', params: ({ event }: { event: { output: TurnOutcome } }) => event.output } },
  { target: 'idle', actions: { type: 'applyOutcome', params: ({ event }: { event: { output: TurnOutcome } }) => event.output } },
] as const;

export const conversationMachine = setup({
  types: {} as { context: ConversationContext; events: ConversationEvent; input: { id: string } },
  actors: {
    startConversation: fromPromise<TurnOutcome, StartInput>(notProvided),
    takeTurn: fromPromise<TurnOutcome, TurnInput>(notProvided),
    endConversation: fromPromise<{ at: number; state: Record<string, unknown>; functionErrors: number }, EndInput>(notProvided),
    sleepUntil: fromPromise<number, { until: number }>(notProvided),
  },
  actions: {
    applyOutcome: assign(({ context }, out: TurnOutcome) => ({
      turns: [...context.turns, ...out.turns],
      state: out.state,
      numOod: context.numOod + out.oodTurns,
      functionErrors: context.functionErrors + out.functionErrors,
      handoff: out.handoff ?? context.handoff,
      variant: out.variant ?? context.variant,
      artifactVersion: out.artifactVersion ?? context.artifactVersion,
      pending: null,
      idleDeadline: out.at + context.start!.idleTimeoutMs,
      endReason: out.end ? ('agent' as const) : context.endReason,
      outcome: { ok: true as const, response: out.response, end: out.end, handoff: out.handoff },
    })),
    refuse: assign((_, error: 'not_started' | 'ended' | 'handed_off' | 'started') => ({ outcome: { ok: false as const, error } })),
  },
  guards: {
    ends: (_, out: TurnOutcome) => out.end,
    handsOff: (_, out: TurnOutcome) => out.handoff !== null,
  },
}).createMachine({
  id: 'conversation',
  context: ({ input }) => ({
    id: input.id,
    start: null,
    variant: null,
    artifactVersion: null,
    startedAt: null,
    endedAt: null,
    state: {},
    integrationAttributes: {},
    asrLangCode: '',
    ttsLangCode: '',
    turns: [],
    numOod: 0,
    functionErrors: 0,
    handoff: null,
    pending: null,
    idleDeadline: null,
    endReason: null,
    outcome: null,
  }),
  initial: 'new',
  states: {
    new: {
      on: {
        START: {
          target: 'starting',
          actions: assign(({ event }) => ({
            start: event.start,
            startedAt: event.start.at,
            integrationAttributes: event.start.integrationAttributes,
            asrLangCode: event.start.asrLangCode,
            ttsLangCode: event.start.ttsLangCode,
            outcome: null,
          })),
        },
        MESSAGE: { actions: { type: 'refuse', params: 'not_started' } },
        CLOSE: { actions: { type: 'refuse', params: 'not_started' } },
      },
    },
    starting: {
      invoke: {
        id: 'start',
        src: 'startConversation',
        input: ({ context }) => ({ id: context.id, start: context.start!, state: context.state }),
        onDone: afterOutcome,
      },
    },
    idle: {
      invoke: { id: 'idleTimer', src: 'sleepUntil', input: ({ context }) => ({ until: context.idleDeadline! }), onDone: { target: 'ending', actions: assign({ endReason: 'idle' }) } },
      on: {
        START: { actions: { type: 'refuse', params: 'started' } },
        MESSAGE: {
          target: 'responding',
          actions: assign(({ context, event }) => ({
            pending: { message: event.message, metadata: event.metadata, at: event.at },
            // Later turns may add integration attributes; earlier ones stay.
            integrationAttributes: { ...context.integrationAttributes, ...event.integrationAttributes },
            asrLangCode: event.asrLangCode ?? context.asrLangCode,
            ttsLangCode: event.ttsLangCode ?? context.ttsLangCode,
            outcome: null,
          })),
        },
        CLOSE: { target: 'ending', actions: assign({ endReason: 'closed', outcome: { ok: true, response: '', end: true, handoff: null } }) },
      },
    },
    responding: {
      invoke: {
        id: 'turn',
        src: 'takeTurn',
        input: ({ context }) => ({
          ...endInput(context),
          history: history(context.turns),
          message: context.pending!.message,
          metadata: context.pending!.metadata,
          at: context.pending!.at,
        }),
        onDone: afterOutcome,
      },
    },
    handedOff: {
      // Nobody may come back to a handed-off conversation: it also ends once idle.
      invoke: { id: 'idleTimer', src: 'sleepUntil', input: ({ context }) => ({ until: context.idleDeadline! }), onDone: { target: 'ending', actions: assign({ endReason: 'idle' }) } },
      on: {
        START: { actions: { type: 'refuse', params: 'started' } },
        MESSAGE: { actions: { type: 'refuse', params: 'handed_off' } },
        CLOSE: { target: 'ending', actions: assign({ endReason: 'closed', outcome: { ok: true, response: '', end: true, handoff: null } }) },
      },
    },
    ending: {
      invoke: {
        id: 'end',
        src: 'endConversation',
        input: ({ context }) => endInput(context),
        onDone: {
          target: 'ended',
          actions: assign(({ context, event }) => ({
            endedAt: event.output.at,
            state: event.output.state,
            functionErrors: context.functionErrors + event.output.functionErrors,
            idleDeadline: null,
          })),
        },
      },
    },
    ended: {
      on: {
        START: { actions: { type: 'refuse', params: 'started' } },
        MESSAGE: { actions: { type: 'refuse', params: 'ended' } },
        CLOSE: { actions: assign({ outcome: { ok: true, response: '', end: true, handoff: null } }) },
      },
    },
  },
});

/** States in which the conversation is still reacting to the last event. */
export const BUSY_STATES = ['starting', 'responding', 'ending'] as const;
