import type { JournalEntry, Store } from '../../store/mod.js';
import type { StartedData } from '../../machines/conversation.js';

/** Who a conversation belongs to, and the client environment it was started in. */
export interface ConversationOwner {
  accountId: string;
  projectId: string;
  environment: string;
  /** The channel it was started on (`CHAT`, `WEBCHAT`, `VOICE-SIP`, ...). */
  channel: string;
}

/**
 * The account and project of a conversation, from its `conversation.started` journal event (its first
 * committed step, or the second after an event that came before its start), or null if it never started.
 * Read from the journal, not from the conversation record: the record is a projection that may lag the turn
 * that created it, and the Chat API never reads a projection to answer. Asked on every Chat API turn, so the
 * first entry is read alone (the journal names it), and the entry after it only when the first did not start
 * the conversation: reading the first two at once walks the conversation's whole journal (`JournalStore.ofActor`).
 */
export async function conversationOwner(store: Store, id: string): Promise<ConversationOwner | null> {
  const key = `conversation/${id}`;
  const [first] = await store.journal.ofActor(key, { limit: 1 });
  if (!first) return null;
  const owner = startedBy(first);
  if (owner) return owner;
  const [second] = await store.journal.ofActor(key, { afterVersion: first.version, limit: 1 });
  return second ? startedBy(second) : null;
}

function startedBy(entry: JournalEntry): ConversationOwner | null {
  const started = entry.events.find((e) => e.type === 'conversation.started');
  if (!started) return null;
  const d = started.data as unknown as StartedData;
  return { accountId: d.account_id, projectId: d.project_id, environment: d.environment, channel: d.channel };
}
