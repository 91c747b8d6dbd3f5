import type { Collection, Doc, Store } from '../../store/mod.js';
import type { ConversationContext, TurnRecord } from '../../machines/conversation.js';

/** A conversation record (contract 2.5), kept by the conversation actor as the conversation goes. */
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
  metrics: { CALL_DURATION: string; CALL_TURN: string[] };
  state: Record<string, unknown>;
  turns: TurnRecord[];
  integration_attributes: Record<string, unknown>;
  asr_lang_code: string;
  tts_lang_code: string;
  function_errors: number;
  artifact_version: string;
  end_reason: string;
  updated_at: string;
  /** The version of the actor snapshot this record was derived from (newer never loses to older). */
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
    ],
  });
}

const iso = (ms: number) => new Date(ms).toISOString();
const seconds = (ms: number) => Math.round(ms) / 1000;

/** The record of a conversation as its context stands (without `id`: the collection key). */
export function toRecord(c: ConversationContext, stateValue: unknown): Omit<ConversationRecord, 'id'> {
  const s = c.start!;
  const lastAt = c.turns.length ? Date.parse(c.turns[c.turns.length - 1].agent_response_datetime) : s.at;
  const end = c.endedAt ?? lastAt;
  const handoffAt = c.handoff && c.turns.length ? Date.parse(c.turns[c.turns.length - 1].agent_response_datetime) : end;
  const total = seconds(end - s.at);
  return {
    account_id: s.accountId,
    project_id: s.projectId,
    variant_id: c.variant?.id ?? '',
    variant_name: c.variant?.name ?? '',
    environment: s.environment,
    started_at: iso(s.at),
    ended_at: c.endedAt ? iso(c.endedAt) : null,
    channel: s.channel,
    from_number: s.fromNumber,
    to_number: s.toNumber,
    // From the context, not the state value: a bridge notification runs `bridge_ended` after the end too.
    in_progress: c.endedAt === null && stateValue !== 'ended',
    num_turns: c.turns.length,
    total_duration: total,
    polyai_duration: c.handoff ? seconds(handoffAt - s.at) : total,
    handoff: c.handoff !== null,
    handoff_reason: c.handoff?.reason ?? '',
    handoff_destination: c.handoff?.destination ?? '',
    num_silences: c.turns.filter((t) => t.is_silence).length,
    num_ood: c.numOod,
    metrics: { CALL_DURATION: String(total), CALL_TURN: c.turns.map((t) => t.user_input_datetime) },
    // Built-in keys first, so a function's own variables of the same name win.
    state: {
      from_: s.fromNumber,
      to: s.toNumber,
      ...(s.callSid ? { call_sid: s.callSid } : {}),
      conversation_id: c.id,
      ...c.state,
      // What the platform knows of outside systems, after the function's variables: these are its own.
      ...(c.awaiting ? { awaiting_external_event: { event_id: c.awaiting.eventId, deadline: iso(c.awaiting.deadline) } } : {}),
      ...(c.bridgeEnded ? { bridge_ended: c.bridgeEnded } : {}),
    },
    turns: c.turns,
    integration_attributes: c.integrationAttributes,
    asr_lang_code: c.asrLangCode,
    tts_lang_code: c.ttsLangCode,
    function_errors: c.functionErrors,
    artifact_version: c.artifactVersion ?? '',
    end_reason: c.endReason ?? '',
    updated_at: new Date().toISOString(),
  };
}
