import { assign, emit, fromPromise, setup } from 'xstate';

/**
 * One outbound call (contract 2.7, 3.3): `queued` until its SIP trunk has a free slot (or the queueing
 * timeout fails it), `calling` while the INVITE is out, then `success` (answered: the conversation runs) or
 * `failure` with a reason. Both are terminal: their status never changes. The status is kept about 2 hours
 * after the call ended (a durable timer), then the call is `expired` and its status is gone (404).
 *
 * Effects, provided by `actors/call/`: `acquireSlot` (claims one of the trunk's call slots, waiting for one
 * to free up after the calls placed before it), `releaseSlot`, `dial` (asks a media gateway to place the
 * call; answers once it is answered or has failed) and the durable timer `sleepUntil`. Times come in events
 * and effects' outputs.
 *
 * Emits `call.queued`, `call.calling`, `call.succeeded` and `call.failed` (the journal contract), each with
 * `account_id`, `project_id` and `call_sid`.
 */

/** What the trigger decided about a call, fixed when it is placed. */
export interface CallRequest {
  account_id: string;
  project_id: string;
  environment: 'sandbox' | 'pre-release' | 'live';
  variant_id: string | null;
  /** The admin connector (kind `outbound`) whose token placed it. */
  connector_id: string;
  telephony_connector_id: string;
  /** E.164. */
  to: string;
  /** E.164. */
  from: string;
  headers: Record<string, string>;
  encryption: string;
}

/** Why a call failed: a code the status endpoint renders as its `reason`. */
export type FailureCode = 'queue_timeout' | 'busy' | 'no_answer' | 'rejected' | 'unreachable' | 'trunk_unusable' | 'trunk_missing' | 'error';

/** The settings a call runs with, fixed when its actor is created (from the worker's configuration). */
export interface CallSettings {
  queueTimeoutMs: number;
  ringTimeoutMs: number;
  retentionMs: number;
  /** Grace beyond the ring timeout for a media gateway's answer before the dial counts as failed. */
  dialGraceMs: number;
  /**
   * While `queued` or `calling`, a durable timer wakes the call this often. Its effects (waiting for a slot,
   * the dial) live in a worker's memory: when that worker dies, the shard's next owner activates the call at
   * its next wake-up, which restarts them (the dial is idempotent by call_sid), instead of at its far deadline.
   */
  wakeMs: number;
}

export interface CallContext {
  callSid: string;
  settings: CallSettings;
  request: CallRequest | null;
  queuedAt: number | null;
  callingAt: number | null;
  answeredAt: number | null;
  endedAt: number | null;
  failure: FailureCode | null;
  /** The SIP status of the final response (486, 603, ...), when there was one. */
  sipStatus: number | null;
  conversationId: string | null;
  /** The next wake-up while queued or calling (see `CallSettings.wakeMs`). */
  wakeAt: number | null;
}

export type CallEvent =
  | { type: 'PLACE'; request: CallRequest; at: number }
  /** An answered call hung up; with the conversation and the answer's SIP status (`CallEndedEvent`). */
  | { type: 'CALL_ENDED'; at: number; conversation_id?: string | null; sip_status?: number | null }
  | { type: 'STATUS' };

/** What `dial` resolves with: the media gateway's outcome, and when it came. */
export interface DialOutput {
  outcome: 'answered' | 'busy' | 'no_answer' | 'rejected' | 'unreachable' | 'trunk_unusable' | 'error';
  sipStatus: number | null;
  conversationId: string | null;
  at: number;
}

export interface SlotInput {
  callSid: string;
  telephonyConnectorId: string;
}
/** What the wait for a slot runs with: the call's placing time orders the calls waiting for its trunk. */
export interface SlotWaitInput extends SlotInput {
  queuedAt: number;
}
export interface DialInput {
  callSid: string;
  request: CallRequest;
  ringTimeoutMs: number;
}

export interface CallInput {
  id: string;
  settings: CallSettings;
}

/** The contract's status of a call in a state (null: unknown or expired, answered as 404). */
export type CallStatus = 'queued' | 'calling' | 'success' | 'failure';

const FAILURE_OF: Record<Exclude<DialOutput['outcome'], 'answered'>, FailureCode> = {
  busy: 'busy',
  no_answer: 'no_answer',
  rejected: 'rejected',
  unreachable: 'unreachable',
  trunk_unusable: 'trunk_unusable',
  error: 'error',
};

const payload = (c: CallContext) => ({ account_id: c.request!.account_id, project_id: c.request!.project_id, call_sid: c.callSid });

/**
 * The wake-up of `queued` and `calling` (see `CallSettings.wakeMs`): a durable timer that re-enters itself
 * with the next deadline when it fires; only the timer restarts, the state's effects keep running.
 */
const wakeUp = {
  initial: 'waiting',
  states: {
    waiting: {
      invoke: {
        id: 'wake',
        src: 'sleepUntil',
        input: ({ context }: { context: CallContext }) => ({ until: context.wakeAt! }),
        onDone: { target: 'waiting', reenter: true, actions: 'nextWake' },
      },
    },
  },
} as const;

export const callMachine = setup({
  types: {} as { context: CallContext; events: CallEvent; input: CallInput; emitted: { type: string; [k: string]: unknown } },
  actors: {
    // Provided by actors/call/kind.ts; a machine does no I/O of its own.
    acquireSlot: fromPromise<number, SlotWaitInput>(async () => {
      throw new Error('acquireSlot is provided by the actor host');
    }),
    releaseSlot: fromPromise<void, SlotInput>(async () => {
      throw new Error('releaseSlot is provided by the actor host');
    }),
    dial: fromPromise<DialOutput, DialInput>(async () => {
      throw new Error('dial is provided by the actor host');
    }),
    sleepUntil: fromPromise<number, { until: number }>(async () => {
      throw new Error('sleepUntil is provided by the actor host');
    }),
  },
  actions: {
    /** The wake-up fired (its output: when): the next one is a period after it. */
    nextWake: assign({ wakeAt: ({ context, event }) => Math.max((event as unknown as { output: number }).output, context.wakeAt!) + context.settings.wakeMs }),
  },
  guards: {
    answered: ({ event }) => (event as unknown as { output: DialOutput }).output.outcome === 'answered',
  },
}).createMachine({
  id: 'call',
  context: ({ input }) => ({
    callSid: input.id,
    settings: input.settings,
    request: null,
    queuedAt: null,
    callingAt: null,
    answeredAt: null,
    endedAt: null,
    failure: null,
    sipStatus: null,
    conversationId: null,
    wakeAt: null,
  }),
  initial: 'new',
  states: {
    new: {
      tags: ['unknown'],
      on: {
        PLACE: {
          target: 'queued',
          actions: [
            assign({ request: ({ event }) => event.request, queuedAt: ({ event }) => event.at }),
            emit(({ context, event }) => ({
              type: 'call.queued',
              data: { account_id: event.request.account_id, project_id: event.request.project_id, call_sid: context.callSid, to_number: event.request.to, from_number: event.request.from },
            })),
          ],
        },
      },
    },
    queued: {
      tags: ['queued'],
      entry: assign({ wakeAt: ({ context }) => context.queuedAt! + context.settings.wakeMs }),
      ...wakeUp,
      invoke: [
        {
          id: 'slot',
          src: 'acquireSlot',
          input: ({ context }) => ({ callSid: context.callSid, telephonyConnectorId: context.request!.telephony_connector_id, queuedAt: context.queuedAt! }),
          onDone: {
            target: 'calling',
            actions: [
              assign({ callingAt: ({ event }) => event.output }),
              emit(({ context }) => ({ type: 'call.calling', data: payload(context) })),
            ],
          },
          onError: { target: 'failure', actions: assign({ failure: 'trunk_missing' as FailureCode, endedAt: ({ context }) => context.queuedAt }) },
        },
        {
          id: 'queueTimer',
          src: 'sleepUntil',
          input: ({ context }) => ({ until: context.queuedAt! + context.settings.queueTimeoutMs }),
          onDone: { target: 'failure', actions: assign({ failure: 'queue_timeout' as FailureCode, endedAt: ({ event }) => event.output }) },
        },
      ],
    },
    calling: {
      tags: ['calling'],
      entry: assign({ wakeAt: ({ context }) => context.callingAt! + context.settings.wakeMs }),
      on: {
        // Only an answered call hangs up: when the dial's answer was lost (its worker died and the call was
        // not woken before the hang-up), the hang-up itself says the call was answered, when it ended, and
        // what the answer would have: its conversation and SIP status.
        CALL_ENDED: {
          target: '#call.success.ended',
          actions: assign({
            endedAt: ({ event }) => event.at,
            answeredAt: ({ context }) => context.callingAt,
            conversationId: ({ event }) => event.conversation_id ?? null,
            sipStatus: ({ event }) => event.sip_status ?? null,
          }),
        },
      },
      ...wakeUp,
      invoke: [
        {
          id: 'dial',
          src: 'dial',
          input: ({ context }) => ({ callSid: context.callSid, request: context.request!, ringTimeoutMs: context.settings.ringTimeoutMs }),
          onDone: [
            {
              guard: 'answered',
              target: 'success',
              actions: assign({
                answeredAt: ({ event }) => event.output.at,
                sipStatus: ({ event }) => event.output.sipStatus,
                conversationId: ({ event }) => event.output.conversationId,
              }),
            },
            {
              target: 'failure',
              actions: assign({
                failure: ({ event }) => FAILURE_OF[event.output.outcome as Exclude<DialOutput['outcome'], 'answered'>],
                sipStatus: ({ event }) => event.output.sipStatus,
                endedAt: ({ event }) => event.output.at,
              }),
            },
          ],
          onError: { target: 'failure', actions: assign({ failure: 'error' as FailureCode, endedAt: ({ context }) => context.callingAt }) },
        },
        {
          // A media gateway answers within the ring timeout; this wakes a passivated actor and fails a dial
          // whose answer never came (its gateway died with the call).
          id: 'dialTimer',
          src: 'sleepUntil',
          input: ({ context }) => ({ until: context.callingAt! + context.settings.ringTimeoutMs + context.settings.dialGraceMs }),
          onDone: { target: 'failure', actions: assign({ failure: 'no_answer' as FailureCode, endedAt: ({ event }) => event.output }) },
        },
      ],
    },
    success: {
      tags: ['success'],
      entry: emit(({ context }) => ({ type: 'call.succeeded', data: { conversation_id: context.conversationId, ...payload(context) } })),
      initial: 'connected',
      states: {
        connected: {
          on: { CALL_ENDED: { target: 'ended', actions: assign({ endedAt: ({ event }) => event.at }) } },
        },
        ended: {
          invoke: [
            // A slot that could not be freed (store down) is not the caller's problem: the status stays.
            { id: 'release', src: 'releaseSlot', input: ({ context }) => slotOf(context), onError: { actions: [] } },
            { id: 'retention', src: 'sleepUntil', input: ({ context }) => ({ until: context.endedAt! + context.settings.retentionMs }), onDone: '#call.expired' },
          ],
        },
      },
    },
    failure: {
      tags: ['failure'],
      // `crashed`: the call failed by a failure of ours (no media gateway answered the dial, or the dial failed
      // inside the platform), not by the far end or the trunk: the Alerts API's `call_crashes`.
      entry: emit(({ context }) => ({ type: 'call.failed', data: { reason: context.failure, sip_status: context.sipStatus, crashed: context.failure === 'error', ...payload(context) } })),
      invoke: [
        { id: 'release', src: 'releaseSlot', input: ({ context }) => slotOf(context), onError: { actions: [] } },
        { id: 'retention', src: 'sleepUntil', input: ({ context }) => ({ until: context.endedAt! + context.settings.retentionMs }), onDone: 'expired' },
      ],
    },
    expired: {
      tags: ['expired'],
    },
  },
});

const slotOf = (c: CallContext): SlotInput => ({ callSid: c.callSid, telephonyConnectorId: c.request!.telephony_connector_id });

/** The status a snapshot shows; null while unknown (never placed) or after retention (expired). */
export function callStatus(snapshot: { hasTag(tag: string): boolean }): CallStatus | null {
  for (const s of ['queued', 'calling', 'success', 'failure'] as const) if (snapshot.hasTag(s)) return s;
  return null;
}
