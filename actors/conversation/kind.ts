import type { Store } from '../../store/mod.js';
import { BUSY_STATES, conversationMachine, type Outcome } from '../../machines/conversation.js';
import type { ActorKind } from '../kinds.js';
import { fromEffect } from '../task.js';
import { sleepUntil } from '../timers.js';
import { conversationEffects, type ConversationDeps } from './effects.js';
import { conversationRecords, toRecord, type ConversationRecord } from './record.js';
import { createEmbedderFromEnv, type Embedder } from './embedding.js';
import { searchIndexer, type RecordFields } from './search.js';

/**
 * The `conversation` actor kind: the machine with its effects provided, asks that wait for the turn to
 * finish, and the conversation record written after every durable snapshot.
 */
export function conversationKind(deps: ConversationDeps & { store: Store; embedder?: Embedder }): ActorKind {
  const effects = conversationEffects(deps);
  const records = conversationRecords(deps.store);
  const search = searchIndexer(deps.store, deps.embedder ?? createEmbedderFromEnv(), (msg, err) => console.error(msg, err));
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
      const record = { id, ...toRecord(s.context, s.value), snapshot_version: version } as ConversationRecord;
      // The search records (postings, summary) go into the same group commit as the record.
      const indexing = search.project(id, record as unknown as RecordFields, version);
      try {
        // Written whole unless the stored record holds this version or a newer one already.
        await records.putNewer(record, 'snapshot_version');
      } finally {
        await indexing;
      }
    },
  };
}
