import type { Store } from '../../store/mod.js';
import { BUSY_STATES, conversationMachine, type Outcome } from '../../machines/conversation.js';
import type { ActorKind } from '../kinds.js';
import { fromEffect } from '../task.js';
import { sleepUntil } from '../timers.js';
import { conversationEffects, type ConversationDeps } from './effects.js';
import { toRecord, type ConversationRecord } from './record.js';
import { createEmbedderFromEnv, type Embedder } from './embedding.js';
import { conversationProjection } from './projection.js';

/**
 * The `conversation` actor kind: the machine with its effects provided, asks that wait for the turn to
 * finish, and the conversation's read models (record, document, search records) written after every
 * durable snapshot (`projection.ts`).
 */
export function conversationKind(deps: ConversationDeps & { store: Store; embedder?: Embedder }): ActorKind {
  const effects = conversationEffects(deps);
  const projection = conversationProjection(deps.store, deps.embedder ?? createEmbedderFromEnv(), (msg, err) => console.error(msg, err));
  const machine = conversationMachine.provide({
    actors: {
      startConversation: fromEffect(effects.start),
      takeTurn: fromEffect(effects.takeTurn),
      endConversation: fromEffect(effects.end),
      sleepUntil,
    },
  });
  return {
    name: 'conversation',
    machine,
    input: (id) => ({ id }),
    settled: (s) => !(BUSY_STATES as readonly string[]).includes(s.value as string),
    reply: (s): Outcome & { state: string } => ({ ...(s.context.outcome ?? { ok: false, error: 'not_started' }), state: s.value as string }),
    project: async (s, id, version) => {
      if (!s.context.start) return;
      await projection({ id, ...toRecord(s.context, s.value), snapshot_version: version } as ConversationRecord, version);
    },
  };
}
