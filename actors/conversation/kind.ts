import type { Store } from '../../store/mod.js';
import { BUSY_STATES, conversationMachine, type BridgeEnded, type ConversationEvent, type Outcome } from '../../machines/conversation.js';
import type { ActorKind } from '../kinds.js';
import { fromEffect } from '../task.js';
import { sleepUntil } from '../timers.js';
import { conversationEffects, type ConversationDeps } from './effects.js';
import { toRecord, type ConversationRecord } from './record.js';
import { createEmbedderFromEnv, type Embedder } from './embedding.js';
import { conversationProjection } from './projection.js';
import { externalWatch } from './external.js';
import { sessionHistory } from '../session/mod.js';

/** What an ask of a conversation answers: a turn's outcome, or what became of an external event or bridge notification. */
export type ConversationReply =
  | (Outcome & { state: string })
  | { ok: true; handled: boolean; state: string }
  | { ok: true; bridge_ended: BridgeEnded; state: string }
  | { ok: false; error: 'ended' | 'not_started'; state: string };

/**
 * The `conversation` actor kind: the machine with its effects provided, asks that wait for the turn to
 * finish, and the conversation's read models (record, document, search records) written after every
 * durable snapshot (`projection.ts`).
 */
export function conversationKind(deps: ConversationDeps & { store: Store; embedder?: Embedder }): ActorKind {
  // Whether a webchat session exists is read from the journal (its creation), not from a projection.
  const sessions = sessionHistory(deps.store);
  const effects = conversationEffects({ hasSession: async (id) => (await sessions.owner(id)) !== null, ...deps });
  const projection = conversationProjection(deps.store, deps.embedder ?? createEmbedderFromEnv(), (msg, err) => console.error(msg, err));
  const machine = conversationMachine.provide({
    actors: {
      startConversation: fromEffect(effects.start),
      takeTurn: fromEffect(effects.takeTurn),
      endConversation: fromEffect(effects.end),
      sleepUntil,
      watchExternalEvent: fromEffect(externalWatch(deps.store)),
      handleExternalEvent: fromEffect(effects.external),
      deliverExternal: fromEffect(effects.deliver),
      handleBridgeEnded: fromEffect(effects.bridge),
    },
  });
  return {
    name: 'conversation',
    machine,
    input: (id) => ({ id }),
    settled: (s) => !(BUSY_STATES as readonly string[]).includes(s.value as string),
    reply: (s, event): ConversationReply => {
      const state = s.value as string;
      const e = event as ConversationEvent;
      // External events and bridge notifications answer with what became of them, not with the last turn.
      if (e.type === 'EXTERNAL_EVENT') return { ok: true, handled: (s.context.handledEvents ?? []).includes(e.event.id), state };
      if (e.type === 'BRIDGE_ENDED') {
        const done = s.context.bridgeEnded ?? null;
        return done ? { ok: true, bridge_ended: done, state } : { ok: false, error: s.context.start ? 'ended' : 'not_started', state };
      }
      return { ...(s.context.outcome ?? { ok: false, error: 'not_started' }), state };
    },
    project: async (s, id, version) => {
      if (!s.context.start) return;
      await projection({ id, ...toRecord(s.context, s.value), snapshot_version: version } as ConversationRecord, version);
    },
  };
}
