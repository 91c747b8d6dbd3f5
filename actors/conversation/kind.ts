import type { Store } from '../../store/mod.js';
import { BUSY_STATES, conversationMachine, type Outcome } from '../../machines/conversation.js';
import type { ActorKind } from '../kinds.js';
import { fromEffect } from '../task.js';
import { sleepUntil } from '../timers.js';
import { conversationEffects, type ConversationDeps } from './effects.js';
import { conversationRecords, toRecord, type ConversationRecord } from './record.js';

/**
 * The `conversation` actor kind: the machine with its effects provided, asks that wait for the turn to
 * finish, and the conversation record written after every durable snapshot.
 */
export function conversationKind(deps: ConversationDeps & { store: Store }): ActorKind {
  const effects = conversationEffects(deps);
  const records = conversationRecords(deps.store);
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
      // Written whole unless the stored record holds this version or a newer one already.
      await records.putNewer({ id, ...toRecord(s.context, s.value), snapshot_version: version } as ConversationRecord, 'snapshot_version');
    },
  };
}
