import type { Store } from '../../store/mod.js';
import { conversationMachine, messageFits, turnInput, type AnsweredData, type BridgeEnded, type ConversationContext, type ConversationEvent, type Outcome, type SideInput, type SideOutcome } from '../../machines/conversation.js';
import { IDLE_EXPIRY, type ActorKind } from '../kinds.js';
import { fromEffect } from '../task.js';
import { sleepUntil } from '../timers.js';
import { conversationEffects, type ConversationDeps } from './effects.js';
import { externalWatch, settleExternalWait } from './external.js';
import type { JournalEvent } from '../../store/mod.js';

/** What an ask of a conversation answers: a turn's outcome, or what became of an external event or bridge notification. */
export type ConversationReply =
  | (Outcome & { state: string })
  | { ok: true; handled: boolean; state: string }
  | { ok: true; bridge_ended: BridgeEnded; state: string }
  | { ok: false; error: 'ended' | 'not_started'; state: string };

/** What of the conversation's context its reply reads. */
type ReplyContext = Pick<ConversationContext, 'integrationAttributes' | 'start'> & { handledEvents?: string[]; bridge?: { ended: BridgeEnded | null } };

/** Why a message was refused, from the state it found the conversation in. */
const refusal = (state: string): 'not_started' | 'handed_off' | 'ended' => (state === 'new' ? 'not_started' : state === 'handedOff' ? 'handed_off' : 'ended');

/**
 * The answer to an ask, from the step's committed events and the state after it: a start or a message is
 * answered with the step's `conversation.answered`; without one it was refused, and the state says why. A
 * close is answered once the conversation has ended (or at once if it had).
 */
export function conversationReply(state: string, context: ReplyContext, event: ConversationEvent, emitted: JournalEvent[]): ConversationReply {
  switch (event.type) {
    // External events and bridge notifications answer with what became of them, not with the last turn.
    case 'EXTERNAL_EVENT':
      return { ok: true, handled: (context.handledEvents ?? []).includes(event.event.id), state };
    case 'BRIDGE_ENDED': {
      const done = context.bridge?.ended ?? null;
      return done ? { ok: true, bridge_ended: done, state } : { ok: false, error: context.start ? 'ended' : 'not_started', state };
    }
    case 'CLOSE':
      return state === 'new' ? { ok: false, error: 'not_started', state } : { ok: true, response: '', end: true, handoff: null, state };
    default: {
      const answered = emitted.find((e) => e.type === 'conversation.answered')?.data as AnsweredData | undefined;
      if (answered) return { ok: true, response: answered.response, end: answered.end, handoff: answered.handoff, ...(answered.failed ? { failed: answered.failed } : {}), state };
      if (event.type === 'START') return { ok: false, error: 'started', state };
      // A live conversation refuses a message whose integration attributes would not fit (the machine's guard: it
      // left the context as it was, so it answers the same now); an ended or handed-off one refuses any as such.
      if (event.type === 'MESSAGE' && state !== 'new' && state !== 'handedOff' && state !== 'ended' && !messageFits({ context, event })) return { ok: false, error: 'attributes_too_large', state };
      return { ok: false, error: refusal(state), state };
    }
  }
}

/**
 * `external_event`'s effect, run once the awaited event came or the wait's deadline passed: the wait's record
 * (`external_waits`) is settled first (`settleExternalWait`). A delete that fails leaves the record to the sweep
 * (`external-sweep.ts`) and runs the function all the same: the conversation goes on either way.
 */
function settledFirst(store: Store, run: (input: SideInput) => Promise<SideOutcome>) {
  return async (input: SideInput): Promise<SideOutcome> => {
    if (input.external) {
      await settleExternalWait(store, { id: input.id, projectId: input.start.projectId, event: input.external }).catch(() => undefined);
    }
    return run(input);
  };
}

/**
 * The `conversation` actor kind: the machine with its effects provided, and asks that wait for the turn to
 * finish (`busy` states) and are answered from the step's events. Nothing is projected on the reply path:
 * the read models follow the journal (`projectors/`).
 */
export function conversationKind(deps: ConversationDeps & { store: Store }): ActorKind {
  const effects = conversationEffects({ hasSession: async (id) => (await deps.store.journal.ofActor(`session/${id}`, { last: 1 })).length > 0, ...deps });
  const machine = conversationMachine.provide({
    actors: {
      startConversation: fromEffect(effects.start),
      endConversation: fromEffect(effects.end),
      sleepUntil,
      watchExternalEvent: fromEffect(externalWatch(deps.store)),
      handleExternalEvent: fromEffect(settledFirst(deps.store, effects.external)),
      deliverExternal: fromEffect(effects.deliver),
      handleBridgeEnded: fromEffect(effects.bridge),
    },
  });
  return {
    name: 'conversation',
    machine,
    input: (id) => ({ id }),
    settled: (s) => !s.hasTag('busy'),
    // The idle expiry, kept by the host: the machine's `expires` states end once it has passed.
    deadline: IDLE_EXPIRY,
    // The turn, run by the host while `responding` carries the tag `turn` (no child actor per turn).
    effect: { tag: 'turn', input: turnInput, run: effects.takeTurn, done: (output) => ({ type: 'TURN_DONE', output }) },
    reply: (s, event, emitted: JournalEvent[] = []) => conversationReply(s.value as string, s.context, event as ConversationEvent, emitted),
  };
}
