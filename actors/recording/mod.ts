/**
 * Call recordings' shared parts (docs/recordings.md): the blob layout of a recording, what counts as
 * personal data, the redacted rendering, WAV, and the projector that renders each call's redacted audio
 * once after it ends. The media gateway writes recordings (gateway/media/recordings), the edge serves them
 * (gateway/edge/conversations/audio.ts).
 */
export { answerLabel, isComplete, RECORDING_COMPLETED, RECORDING_KIND, RECORDING_RATE, RECORDING_STARTED, recordingCompletedEntry, recordingPrefix, recordingStartedEntry, type RecordingCompleted, type RecordingStarted, type AnswerEvent, type DigitEvent, type RecordingEvent, type RecordingMeta, type Redaction } from './layout.js';
export { digitsKind, digitRuns, luhn, maskText, REDACTED, textKinds } from './pii.js';
export { muted, parseEvents, redactedTracks, redactionSpans, renderRedacted, utterancesOf, type RedactedTracks, type TurnText } from './redact.js';
export { mix, wavHeader } from './wav.js';
export { recordingsProjector } from './projector.js';
export { audioOf, recordingCatalog, type AudioInfo } from './catalog.js';
export { markedValues } from './marks.js';
export { completeIfOrphaned, ORPHANED_AFTER_MS } from './orphans.js';
