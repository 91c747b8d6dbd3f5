import type { Collection, Doc, Store } from '../../store/mod.js';
import type { TurnRecord } from '../../machines/conversation.js';

/** A conversation record (contract 2.5), folded from the conversation's journal entries (`projectors/record-fold.ts`). */
export interface ConversationRecord extends Doc {
  account_id: string;
  project_id: string;
  variant_id: string;
  variant_name: string;
  environment: string;
  started_at: string;
  ended_at: string | null;
  channel: string;
  from_number: string;
  to_number: string;
  in_progress: boolean;
  num_turns: number;
  total_duration: number;
  polyai_duration: number;
  handoff: boolean;
  handoff_reason: string;
  handoff_destination: string;
  num_silences: number;
  num_ood: number;
  /** The call duration metric; `CALL_TURN` (the turns' times) is rendered from `turns` (`view.ts`), not stored. */
  metrics: { CALL_DURATION: string };
  state: Record<string, unknown>;
  turns: TurnRecord[];
  integration_attributes: Record<string, unknown>;
  asr_lang_code: string;
  tts_lang_code: string;
  function_errors: number;
  artifact_version: string;
  end_reason: string;
  updated_at: string;
  /** The version of the last journal entry folded into it (an entry of this version or older is skipped; newer never loses to older). */
  snapshot_version?: number;
}

/** The conversations collection, with the indexes the read APIs filter on. */
export function conversationRecords(store: Store): Collection<ConversationRecord> {
  return store.collection<ConversationRecord>({
    name: 'conversations',
    indexes: [
      { fields: ['project_id', 'started_at'] },
      { fields: ['project_id', 'environment', 'started_at'] },
      // The Conversations API's channel and variant filters (in time order within each).
      { fields: ['project_id', 'environment', 'channel', 'started_at'] },
      { fields: ['project_id', 'environment', 'variant_id', 'started_at'] },
      // Semantic search embeds the conversations in progress at query time (their entry changes once, at the end).
      { fields: ['project_id', 'environment', 'in_progress', 'started_at'] },
      // A semantic search's later pages rank as of their walk's first page: the conversations that ended since
      // (their stored final vector holds later turns) are found by when they ended, and only those that started
      // in the request's range are read (the store checks `started_at` in the index's keys).
      { fields: ['project_id', 'environment', 'ended_at', 'started_at'] },
    ],
    readModel: true,
    // A record is rewritten at every step of its conversation: only the new turns are written each time.
    appended: 'turns',
  });
}
