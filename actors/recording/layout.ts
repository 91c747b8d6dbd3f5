/**
 * Where a call's recording lives in the blob store: `rec/<account>/<project>/<conversation>/` holding
 * `caller` and `agent` (16-bit little-endian 8 kHz mono PCM on one timeline from the answer: sample n of
 * each track is the same instant), `events` (JSON lines: DTMF digits with their offsets), `meta` (JSON,
 * `RecordingMeta`) and, once rendered, `redacted-caller`, `redacted-agent` and `redactions` (JSON).
 */
export const RECORDING_RATE = 8000;

export interface RecordingMeta {
  conversation_id: string;
  account_id: string;
  project_id: string;
  call_sid: string;
  /** Epoch ms of sample 0. */
  started_at: number;
  /** Epoch ms the call ended; null while it runs (or when the gateway died mid-call). */
  ended_at: number | null;
  /** Epoch ms after which the recording is deleted (RECORDING_RETENTION_DAYS). */
  expires_at: number;
}

/** One line of `events`: a digit the caller keyed, at `at_ms` from sample 0. */
export interface RecordingEvent {
  kind: 'dtmf';
  digit: string;
  at_ms: number;
}

/** One muted span of the redacted rendering (never the value). */
export interface Redaction {
  start_ms: number;
  end_ms: number;
  kind: 'card_number' | 'phone_number' | 'email' | 'date_of_birth' | 'marked';
  source: 'speech' | 'dtmf';
}

export const recordingPrefix = (accountId: string, projectId: string, conversationId: string) => `rec/${accountId}/${projectId}/${conversationId}`;
