import type { ConversationRecord } from '../../actors/conversation/mod.js';
import type { JournalEntry } from '../../store/mod.js';

/**
 * The journal entry a conversation actor would have committed had `record` happened in one step: started,
 * its turns, changed, and ended unless it is in progress. For seeding the conversations projector with many
 * conversations without running them (tests of the read side, the Conversations benchmark).
 */
export function entryOfRecord(r: ConversationRecord, seq: number, version = 1): JournalEntry {
  const owner = { account_id: r.account_id, project_id: r.project_id };
  const handoff = r.handoff ? { destination: r.handoff_destination, reason: r.handoff_reason } : null;
  const state = r.state ?? {};
  return {
    seq, key: `conversation/${r.id}`, kind: 'conversation', id: r.id, shard: 0, version, at: Date.parse(r.ended_at ?? r.started_at) || 0,
    value: r.in_progress ? 'idle' : 'ended',
    events: [
      { type: 'conversation.started', data: { ...owner, channel: r.channel, environment: r.environment, variant_id: r.variant_id, from_number: r.from_number, to_number: r.to_number, started_at: r.started_at, state } },
      ...r.turns.map((turn) => ({ type: 'conversation.turn', data: { ...owner, channel: r.channel, turn, latency_ms: Math.round(turn.latency * 1000), function_errors: 0 } })),
      {
        type: 'conversation.changed',
        data: {
          ...owner, state, variant_id: r.variant_id, variant_name: r.variant_name, artifact_version: r.artifact_version, handoff, num_ood: r.num_ood,
          function_errors: r.function_errors, integration_attributes: r.integration_attributes, asr_lang_code: r.asr_lang_code, tts_lang_code: r.tts_lang_code,
          end_reason: r.end_reason, awaiting_external_event: null, bridge_ended: null,
        },
      },
      ...(r.in_progress ? [] : [{ type: 'conversation.ended', data: { ...owner, channel: r.channel, ended_at: r.ended_at, reason: r.end_reason, crashed: false } }]),
    ],
  };
}
