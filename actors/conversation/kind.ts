import { fromPromise } from 'xstate';
import { StoreDuplicateError, type Store } from '../../store/mod.js';
import { BUSY_STATES, conversationMachine, type Outcome } from '../../machines/conversation.js';
import type { ActorKind } from '../kinds.js';
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
      startConversation: fromPromise(({ input }) => effects.start(input)),
      takeTurn: fromPromise(({ input }) => effects.takeTurn(input)),
      endConversation: fromPromise(({ input }) => effects.end(input)),
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
      const record = { ...toRecord(s.context, s.value), snapshot_version: version };
      // The search records (postings, summary) go into the same group commit as the record.
      const indexing = search.project(id, record as unknown as RecordFields, version);
      try {
        if (await records.update({ id, snapshot_version: { $lt: version } }, { $set: record })) return;
        try {
          await records.insert({ id, ...record } as ConversationRecord);
        } catch (err) {
          // The record holds this version or a newer one already.
          if (!(err instanceof StoreDuplicateError)) throw err;
        }
      } finally {
        await indexing;
      }
    },
  };
}
