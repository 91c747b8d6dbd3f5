/**
 * The conversation record (contract 2.5) folded from the conversation's journal entries: pure, entry by
 * entry. `conversation.started` creates it, `conversation.turn` appends a turn, `conversation.changed`
 * sets the other fields, `conversation.ended` ends it; the derived fields (durations, counts, the call
 * duration metric) follow from those. The state, built-in keys included, is the conversation's own, as its
 * machine holds it. A step costs the same whatever the
 * conversation's length: silent turns are counted as they are appended, and what is a list of the turns
 * (`metrics.CALL_TURN`) is not stored but rendered from them (`view.ts`). The record stores the version of
 * the last entry folded into it (`snapshot_version`): an entry of that version or older is skipped, so
 * folding an entry twice (a projector that resumes from its checkpoint after a crash) changes nothing.
 */
import type { ChangedData, EndedData, StartedData, TurnData, TurnRecord } from '../../../machines/conversation.js';
import type { ConversationRecord } from '../record.js';
import type { JournalEntry } from '../../../store/mod.js';

const seconds = (ms: number) => Math.round(ms) / 1000;

/** A new record from `conversation.started` (the fields later events set start empty). */
function started(id: string, d: StartedData, at: string): ConversationRecord {
  return {
    id,
    account_id: d.account_id,
    project_id: d.project_id,
    variant_id: d.variant_id ?? '',
    variant_name: '',
    environment: d.environment,
    started_at: d.started_at,
    ended_at: null,
    channel: d.channel,
    from_number: d.from_number,
    to_number: d.to_number,
    in_progress: true,
    num_turns: 0,
    total_duration: 0,
    polyai_duration: 0,
    handoff: false,
    handoff_reason: '',
    handoff_destination: '',
    num_silences: 0,
    num_ood: 0,
    metrics: { CALL_DURATION: '0' },
    // The conversation's own state as it started (its built-in keys: `builtinState`).
    state: d.state,
    turns: [],
    integration_attributes: {},
    asr_lang_code: '',
    tts_lang_code: '',
    function_errors: 0,
    artifact_version: '',
    end_reason: '',
    updated_at: at,
    snapshot_version: 0,
  };
}

/** Sets what `conversation.changed` carries. */
function changed(r: ConversationRecord, d: ChangedData): void {
  r.variant_id = d.variant_id || r.variant_id;
  r.variant_name = d.variant_name;
  r.artifact_version = d.artifact_version;
  r.handoff = d.handoff !== null;
  r.handoff_reason = d.handoff?.reason ?? '';
  r.handoff_destination = d.handoff?.destination ?? '';
  r.num_ood = d.num_ood;
  r.function_errors = d.function_errors;
  r.integration_attributes = d.integration_attributes;
  r.asr_lang_code = d.asr_lang_code;
  r.tts_lang_code = d.tts_lang_code;
  r.end_reason = d.end_reason;
  // The conversation's state as it stands, built-in keys included (a function may have changed or deleted them).
  // What the platform knows of outside systems last: these are its own.
  r.state = Object.assign(
    {},
    d.state,
    d.awaiting_external_event ? { awaiting_external_event: d.awaiting_external_event } : {},
    d.bridge_ended ? { bridge_ended: d.bridge_ended } : {},
  );
}

/** The fields derived from the others in constant time: the turn count, durations and the call duration metric. */
function derive(r: ConversationRecord): void {
  const start = Date.parse(r.started_at);
  const last = r.turns.length ? Date.parse(r.turns[r.turns.length - 1].agent_response_datetime) : start;
  const end = r.ended_at ? Date.parse(r.ended_at) : last;
  const total = seconds(end - start);
  r.num_turns = r.turns.length;
  r.total_duration = total;
  r.polyai_duration = r.handoff ? seconds((r.turns.length ? last : end) - start) : total;
  r.metrics = { CALL_DURATION: String(total) };
}

/**
 * The record after `entry` (a conversation entry of conversation `id`): `record` itself when the entry was
 * folded before (or says nothing of a record), a new one on `conversation.started`, null while there is none.
 * `record` is changed in place.
 */
export function foldRecord(record: ConversationRecord | null, id: string, entry: JournalEntry): ConversationRecord | null {
  if (record && (record.snapshot_version ?? 0) >= entry.version) return record;
  let r = record;
  let touched = false;
  const at = new Date(entry.at).toISOString();
  for (const e of entry.events) {
    if (e.type === 'conversation.started') {
      if (!r) r = started(id, e.data as unknown as StartedData, at);
    } else if (!r) {
      continue;
    } else if (e.type === 'conversation.turn') {
      const turn = (e.data as unknown as TurnData).turn as TurnRecord;
      r.turns.push(turn);
      if (turn.is_silence) r.num_silences++;
    } else if (e.type === 'conversation.changed') {
      changed(r, e.data as unknown as ChangedData);
    } else if (e.type === 'conversation.ended') {
      const d = e.data as unknown as EndedData;
      r.ended_at = d.ended_at;
      r.in_progress = false;
    } else {
      continue;
    }
    touched = true;
  }
  if (!r) return null;
  if (touched) {
    derive(r);
    r.updated_at = at;
  }
  r.snapshot_version = entry.version;
  return r;
}
