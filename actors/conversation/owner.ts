import type { Store } from '../../store/mod.js';
import type { StartedData } from '../../machines/conversation.js';

/** Who a conversation belongs to. */
export interface ConversationOwner {
  accountId: string;
  projectId: string;
}

/**
 * The account and project of a conversation, from its `conversation.started` journal event (its first
 * committed step), or null if it never started. Read from the journal, not from the conversation record:
 * the record is a projection that may lag the turn that created it, and the Chat API never reads a
 * projection to answer.
 */
export async function conversationOwner(store: Store, id: string): Promise<ConversationOwner | null> {
  for (const entry of await store.journal.ofActor(`conversation/${id}`, { limit: 2 })) {
    const started = entry.events.find((e) => e.type === 'conversation.started');
    if (started) {
      const d = started.data as unknown as StartedData;
      return { accountId: d.account_id, projectId: d.project_id };
    }
  }
  return null;
}
