/**
 * Response shapes of the Conversations API. v3 (and v2, which shares its schema) is the contract's record
 * (2.5): ISO 8601 timestamps, empty strings never null, `latency` on turns only with `include_latency`,
 * the translation fields always present. v1 is the legacy shape: the same fields, null where a text is
 * empty, no `latency` or translation fields, and the `descriptions` object beside the rows.
 */
import type { ConversationRecord } from '../../../actors/conversation/record.js';
import type { TurnRecord } from '../../../machines/conversation.js';

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
    ...(includeLatency ? { latency: typeof t.latency === 'number' ? t.latency : 0 } : {}),
    translated_user_input: str(t.translated_user_input),
    english_agent_response: str(t.english_agent_response),
    intents: Array.isArray(t.intents) ? t.intents : [],
    entities: t.entities ?? {},
    is_ood: t.is_ood === true,
    is_silence: t.is_silence === true,
  };
}

export function conversationV3(r: ConversationRecord, o: ViewOptions) {
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
    num_turns: typeof r.num_turns === 'number' ? r.num_turns : (r.turns ?? []).length,
    total_duration: r.total_duration ?? 0,
    polyai_duration: r.polyai_duration ?? 0,
    handoff: r.handoff === true,
    handoff_reason: str(r.handoff_reason),
    handoff_destination: str(r.handoff_destination),
    num_silences: r.num_silences ?? 0,
    num_ood: r.num_ood ?? 0,
    metrics: r.metrics ?? { CALL_DURATION: '', CALL_TURN: [] },
    state: r.state ?? {},
    turns: o.showTranscripts ? (r.turns ?? []).map((t) => turnV3(t, o.includeLatency)) : [],
  };
}

const orNull = (v: unknown) => (v === '' || v === undefined ? null : v);

export function conversationV1(r: ConversationRecord, o: ViewOptions) {
  const v3 = conversationV3(r, { ...o, includeLatency: false });
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(v3)) out[k] = k === 'turns' ? v : orNull(v);
  out.turns = v3.turns.map((t) => {
    const { translated_user_input: _a, english_agent_response: _b, ...legacy } = t;
    return Object.fromEntries(Object.entries(legacy).map(([k, v]) => [k, orNull(v)]));
  });
  return out;
}

/** v1's `descriptions.conversations`: each response key of a conversation, described. */
export const V1_DESCRIPTIONS: Record<string, string> = {
  id: 'Conversation id',
  account_id: 'Account id',
  project_id: 'Project id',
  variant_id: 'Id of the variant the conversation ran',
  variant_name: 'Name of the variant the conversation ran',
  environment: 'Client environment: live, sandbox or pre-release',
  started_at: 'When the conversation started (ISO 8601, UTC)',
  channel: 'Channel label, e.g. VOICE-SIP, WEBCHAT, CHAT',
  from_number: 'Caller number',
  to_number: 'Agent number',
  in_progress: 'Whether the conversation is still in progress',
  num_turns: 'Number of turns (correct even when turns is empty)',
  total_duration: 'Duration in seconds',
  polyai_duration: 'Seconds handled by the agent before any handoff',
  handoff: 'Whether the conversation was handed off',
  handoff_reason: 'Reason of the handoff',
  handoff_destination: 'Destination of the handoff',
  num_silences: 'Number of silent turns',
  num_ood: 'Number of out-of-domain turns',
  metrics: 'Custom metrics: CALL_DURATION (seconds, as a string) and CALL_TURN (turn timestamps)',
  state: 'Conversation variables set during the conversation, built-in (from_, to, ...) and custom',
  turns: 'Turns in order: user_input, user_input_dtmf, user_input_datetime, barge_in, agent_response, agent_response_datetime, intents, entities, is_ood, is_silence; empty when transcripts are hidden for the project',
};
