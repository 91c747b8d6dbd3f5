/**
 * Response shapes of the Conversations API. v3 (and v2, which shares its schema) is the contract's record
 * (2.5): ISO 8601 timestamps, empty strings never null, `latency` on turns only with `include_latency`,
 * the translation fields always present. v1 is the legacy shape: the same fields, null where a text is
 * empty, no `latency` or translation fields, and the `descriptions` object beside the rows.
 */
import { conversationV3, documentJson, type ConversationRecord, type ViewOptions } from '../../../actors/conversation/mod.js';
import { maskedObject, maskedRow, maskedTurnsOf, type Masking } from './mask.js';
import { isDocument, plainDocument, type Row } from './reader.js';

export { conversationV3, type ViewOptions };

/** A row's v2/v3 JSON: a document's stored bytes (turns spliced out when transcripts are hidden), else rendered. */
export function rowJson(row: Row, view: ViewOptions): Buffer[] {
  if (isDocument(row)) return documentJson(row, view.showTranscripts);
  return [Buffer.from(JSON.stringify(conversationV3(row, view)))];
}

/**
 * A row's v2/v3 JSON as a key without `pii` reads it. A document without personal data (`plainDocument`) is
 * its stored bytes; a document a search kept is masked from the turns its filter parsed (`Masking.kept`),
 * spliced into the stored bytes; a record (in progress, or read with latency) is masked as it is rendered,
 * before it is written as JSON; any other document's JSON is parsed to mask it.
 */
export function maskedJson(row: Row, view: ViewOptions, marked: string[], masking: Masking): Buffer[] {
  if (plainDocument(row, marked)) return rowJson(row, view);
  if (!isDocument(row)) {
    const rendered = conversationV3(row, view);
    maskedObject(rendered, marked);
    return [Buffer.from(JSON.stringify(rendered))];
  }
  const turns = view.showTranscripts ? masking.kept?.get(row) : undefined;
  if (turns) return maskedTurnsOf(documentJson(row, true)[0], row.turns_at, row.turns_end, turns, marked);
  return maskedRow(rowJson(row, view), marked);
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
