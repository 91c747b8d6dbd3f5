/**
 * The v3 (and v2) representation of a conversation record (contract 2.5): ISO 8601 timestamps, empty
 * strings never null, `latency` on turns only when asked for, the translation fields always present. It
 * lives beside the record because the projection renders it too: ended conversations are stored rendered
 * (`document.ts`), and the Conversations API renders the others with this same function.
 */
import type { TurnRecord } from '../../machines/conversation.js';
import type { ConversationRecord } from './record.js';

export interface ViewOptions {
  version: 'v1' | 'v2' | 'v3';
  showTranscripts: boolean;
  includeLatency: boolean;
}

const str = (v: unknown) => (typeof v === 'string' ? v : v === null || v === undefined ? '' : String(v));

function turnV3(t: TurnRecord, includeLatency: boolean) {
  return {
    user_input: str(t.user_input),
    user_input_dtmf: str(t.user_input_dtmf),
    user_input_datetime: str(t.user_input_datetime),
    barge_in: t.barge_in === true,
    agent_response: str(t.agent_response),
    agent_response_datetime: str(t.agent_response_datetime),
    translated_user_input: str(t.translated_user_input),
    english_agent_response: str(t.english_agent_response),
    intents: Array.isArray(t.intents) ? t.intents : [],
    entities: t.entities ?? {},
    is_ood: t.is_ood === true,
    is_silence: t.is_silence === true,
    // Last: a literal that adds properties after a spread is slow in V8 (test/lint.spread.test.ts).
    ...(includeLatency ? { latency: typeof t.latency === 'number' ? t.latency : 0 } : {}),
  };
}

export function conversationV3(r: ConversationRecord, o: ViewOptions) {
  const turns = r.turns ?? [];
  return {
    id: r.id,
    account_id: str(r.account_id),
    project_id: str(r.project_id),
    variant_id: str(r.variant_id),
    variant_name: str(r.variant_name),
    environment: str(r.environment),
    started_at: str(r.started_at),
    channel: str(r.channel),
    from_number: str(r.from_number),
    to_number: str(r.to_number),
    in_progress: r.in_progress === true,
    num_turns: typeof r.num_turns === 'number' ? r.num_turns : turns.length,
    total_duration: r.total_duration ?? 0,
    polyai_duration: r.polyai_duration ?? 0,
    handoff: r.handoff === true,
    handoff_reason: str(r.handoff_reason),
    handoff_destination: str(r.handoff_destination),
    num_silences: r.num_silences ?? 0,
    num_ood: r.num_ood ?? 0,
    // The list of turn times is the turns' own: rendered here rather than stored in the record, which a
    // step would then rewrite whole at every turn.
    metrics: { CALL_DURATION: str(r.metrics?.CALL_DURATION), CALL_TURN: turns.map((t) => str(t.user_input_datetime)) },
    state: r.state ?? {},
    turns: o.showTranscripts ? turns.map((t) => turnV3(t, o.includeLatency)) : [],
  };
}
