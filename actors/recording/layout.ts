/**
 * Where a call's recording lives in the blob store: `rec/<account>/<project>/<conversation>/` holding
 * `caller` and `agent` (16-bit little-endian 8 kHz mono PCM on one timeline from the answer: sample n of
 * each track is the same instant), `events` (JSON lines: DTMF digits and the agent's answers, with their
 * offsets), `meta` (JSON,
 * `RecordingMeta`) and, once rendered, `redacted-caller`, `redacted-agent` and `redactions` (JSON).
 */
import { createHash } from 'node:crypto';
import type { JournalEntry } from '../../store/mod.js';

export const RECORDING_RATE = 8000;

export interface RecordingMeta {
  conversation_id: string;
  account_id: string;
  project_id: string;
  call_sid: string;
  /** Epoch ms of sample 0. */
  started_at: number;
  /**
   * Epoch ms the call ended, written after the last chunk of each track: set, the recording is complete;
   * null while it runs (or when the gateway died mid-call).
   */
  ended_at: number | null;
  /** Epoch ms after which the recording is deleted (RECORDING_RETENTION_DAYS). */
  expires_at: number;
}

/**
 * Whether the recording is complete (its last chunks written): what its redacted rendering is made from, once,
 * and kept. Rendered from one that is not, a redaction would be short by the call's last seconds.
 */
export const isComplete = (meta: RecordingMeta): boolean => meta.ended_at !== null;

/** One line of `events`. */
export type RecordingEvent = DigitEvent | AnswerEvent;

/** A digit the caller keyed, at `at_ms` from sample 0. */
export interface DigitEvent {
  kind: 'dtmf';
  digit: string;
  at_ms: number;
}

/**
 * An answer the agent spoke: from its first frame (`at_ms`) to the end of its last sent so far (`end_ms`; cut short
 * by a barge-in), and `text`, the `answerLabel` of what it said (never the text: the redaction finds the turn that
 * said it). Written again as it grows: of the lines with one `at_ms`, the last holds.
 */
export interface AnswerEvent {
  kind: 'answer';
  at_ms: number;
  end_ms: number;
  text: string;
}

/**
 * What names an answer in `events`: a digest of its text, so the redaction can tell which turn an answer was
 * (one not spoken, a synthesis that failed, leaves no line) without the events holding what the agent said.
 */
export const answerLabel = (text: string): string => createHash('sha256').update(text).digest('base64url').slice(0, 16);

/** One muted span of the redacted rendering (never the value). */
export interface Redaction {
  start_ms: number;
  end_ms: number;
  kind: 'card_number' | 'phone_number' | 'email' | 'date_of_birth' | 'marked';
  /** `speech` the caller's words, `dtmf` the caller's keys, `agent` an answer the agent spoke. */
  source: 'speech' | 'dtmf' | 'agent';
}

/**
 * The journal's "recording complete" fact: once a call's media has ended and the recorder has written the
 * last chunk of each track and the meta's `ended_at`, the media gateway appends one non-actor entry
 * `recording/<conversation>` (kind `recording`) holding this event. The recordings projector renders a
 * call's redacted audio only once its conversation has ended and this fact exists (the meta's `ended_at`).
 */
export const RECORDING_KIND = 'recording';
export const RECORDING_COMPLETED = 'recording.completed';
/**
 * The journal's "recording started" fact: once a call's recording has its meta (the project records), the media
 * gateway appends one non-actor entry `recording/<conversation>` holding this event, from which the recordings
 * projector catalogues it (`catalog.ts`): what a conversation row says of its audio.
 */
export const RECORDING_STARTED = 'recording.started';

/** The data of `recording.started`. */
export interface RecordingStarted {
  conversation_id: string;
  account_id: string;
  project_id: string;
  call_sid: string;
  /** Epoch ms of sample 0. */
  started_at: number;
  /** Epoch ms after which the recording is deleted. */
  expires_at: number;
}

/** The data of `recording.completed`. */
export interface RecordingCompleted {
  conversation_id: string;
  account_id: string;
  project_id: string;
  call_sid: string;
  /** Epoch ms the call ended (the meta's `ended_at`). */
  ended_at: number;
}

/** A non-actor journal entry of a recording's: one fact of its. */
const recordingEntry = (type: string, data: { conversation_id: string } & object): Omit<JournalEntry, 'seq' | 'at'> => ({
  key: `${RECORDING_KIND}/${data.conversation_id}`,
  kind: RECORDING_KIND,
  id: data.conversation_id,
  shard: -1,
  version: 0,
  value: null,
  events: [{ type, data: { ...data } }],
});

/** The non-actor journal entry saying a recording is complete. */
export const recordingCompletedEntry = (data: RecordingCompleted) => recordingEntry(RECORDING_COMPLETED, data);

/** The non-actor journal entry saying a recording has started. */
export const recordingStartedEntry = (data: RecordingStarted) => recordingEntry(RECORDING_STARTED, data);

export const recordingPrefix = (accountId: string, projectId: string, conversationId: string) => `rec/${accountId}/${projectId}/${conversationId}`;
