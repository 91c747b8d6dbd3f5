import type { BlobStore } from '../../store/blobs/mod.js';
import { answerLabel, RECORDING_RATE, type AnswerEvent, type DigitEvent, type RecordingEvent, type Redaction } from './layout.js';
import { digitsKind, textKinds } from './pii.js';

/** A turn as the conversation record has it (contract 2.5 turn fields): what each side said. */
export interface TurnText {
  user_input: string;
  user_input_dtmf: string;
  is_silence: boolean;
  agent_response?: string;
}

/**
 * The media gateway's turn-taking defaults (gateway/media/turn-taking.ts, VOICE_* settings): a pause
 * between digits longer than `interDigitMs` starts a new entry; utterances by the same energy detector.
 */
const DEFAULT_TURN_TAKING = { speechLevel: 600, speechStartMs: 60, endSilenceMs: 700, interDigitMs: 1500 };
const FRAME_SAMPLES = 160;
const DIGIT_GAP_MS = DEFAULT_TURN_TAKING.interDigitMs;
/** Around a keyed run: the first tone starts a little before its event, the last lasts after it. */
const DTMF_BEFORE_MS = 100;
const DTMF_AFTER_MS = 300;

/**
 * The spans to mute: keyed runs of digits that are personal data (from the digits' own times), the
 * caller's utterances whose recognised text holds personal data, and the agent's answers whose text does (an
 * agent reading back a card number). The recogniser reports text per utterance, not per word, so a spoken span
 * is the whole utterance, found on the caller's track with the turn-taking detector's thresholds and matched to
 * the record's spoken turns in order; an answer's span is where it was sent, matched to its turn by its label.
 */
export function redactionSpans(caller: Buffer, events: RecordingEvent[], turns: TurnText[], marked: string[] = []): Redaction[] {
  const spans: Redaction[] = [];
  // Keyed: runs of digits split by a pause or '#'.
  let run: DigitEvent[] = [];
  const closeRun = () => {
    const digits = run.map((e) => e.digit).join('');
    const kind = digitsKind(digits) ?? (marked.includes(digits) ? 'marked' : null);
    if (kind) spans.push({ start_ms: Math.max(0, run[0].at_ms - DTMF_BEFORE_MS), end_ms: run[run.length - 1].at_ms + DTMF_AFTER_MS, kind, source: 'dtmf' });
    run = [];
  };
  for (const e of events.filter((x): x is DigitEvent => x.kind === 'dtmf').sort((a, b) => a.at_ms - b.at_ms)) {
    if (run.length && (e.at_ms - run[run.length - 1].at_ms > DIGIT_GAP_MS)) closeRun();
    if (e.digit === '#') {
      if (run.length) closeRun();
      continue;
    }
    if (/^[0-9]$/.test(e.digit)) run.push(e);
  }
  if (run.length) closeRun();
  // Spoken: the n-th caller utterance is the n-th spoken turn (turn 0 is the agent's opening).
  const spoken = turns.slice(1).filter((t) => !t.is_silence && !t.user_input_dtmf);
  const utterances = utterancesOf(caller);
  spoken.forEach((t, i) => {
    const u = utterances[i];
    if (!u) return;
    for (const kind of textKinds(t.user_input, marked)) spans.push({ start_ms: u.start_ms, end_ms: u.end_ms, kind, source: 'speech' });
  });
  // Answers: each is the first turn after the previous answer's whose text has its label.
  const answers = answersOf(events);
  const labels = answers.length ? turns.map((t) => (typeof t.agent_response === 'string' ? answerLabel(t.agent_response) : null)) : [];
  let next = 0;
  for (const a of answers) {
    const i = labels.indexOf(a.text, next);
    if (i < 0) continue;
    next = i + 1;
    for (const kind of textKinds(turns[i].agent_response!, marked)) spans.push({ start_ms: a.at_ms, end_ms: a.end_ms, kind, source: 'agent' });
  }
  return spans.sort((a, b) => a.start_ms - b.start_ms);
}

/** The answers of `events` in the order they were spoken, each as its last line has it. */
function answersOf(events: RecordingEvent[]): AnswerEvent[] {
  const byStart = new Map<number, AnswerEvent>();
  for (const e of events) if (e.kind === 'answer' && Number.isFinite(e.at_ms) && Number.isFinite(e.end_ms) && typeof e.text === 'string') byStart.set(e.at_ms, e);
  return [...byStart.values()].sort((a, b) => a.at_ms - b.at_ms);
}

/** The caller's utterances on the track: voiced frames as turn-taking finds them, with its preroll. */
export function utterancesOf(track: Buffer): Array<{ start_ms: number; end_ms: number }> {
  const o = DEFAULT_TURN_TAKING;
  const frameBytes = FRAME_SAMPLES * 2;
  const frameMs = (FRAME_SAMPLES * 1000) / RECORDING_RATE;
  const out: Array<{ start_ms: number; end_ms: number }> = [];
  let voicedRun = 0;
  let silentRun = 0;
  let start = -1;
  const frames = Math.floor(track.length / frameBytes);
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    for (let i = 0; i < FRAME_SAMPLES; i++) {
      const s = track.readInt16LE(f * frameBytes + i * 2);
      sum += s * s;
    }
    const voiced = Math.sqrt(sum / FRAME_SAMPLES) >= o.speechLevel;
    if (start < 0) {
      voicedRun = voiced ? voicedRun + 1 : 0;
      if (voicedRun * frameMs >= o.speechStartMs) {
        start = Math.max(0, (f - voicedRun + 1) * frameMs - 200);
        silentRun = 0;
      }
      continue;
    }
    silentRun = voiced ? 0 : silentRun + 1;
    if (silentRun * frameMs >= o.endSilenceMs || f === frames - 1) {
      out.push({ start_ms: start, end_ms: (f - silentRun + 1) * frameMs + 100 });
      start = -1;
      voicedRun = 0;
    }
  }
  return out;
}

/** A copy of a track with the spans set to silence. */
export function muted(track: Buffer, spans: Redaction[]): Buffer {
  const out = Buffer.from(track);
  for (const s of spans) {
    const a = Math.min(out.length, Math.floor((s.start_ms * RECORDING_RATE) / 1000) * 2);
    const b = Math.min(out.length, Math.ceil((s.end_ms * RECORDING_RATE) / 1000) * 2);
    out.fill(0, a, b);
  }
  return out;
}

export function parseEvents(raw: Buffer | null): RecordingEvent[] {
  if (!raw) return [];
  return raw.toString().split('\n').filter(Boolean).map((l) => JSON.parse(l) as RecordingEvent);
}

/** A redacted rendering: both tracks muted over the spans, and the spans. */
export interface RedactedTracks {
  caller: Buffer;
  agent: Buffer;
  spans: Redaction[];
}

/** A call's redacted recording as it now stands, computed and not stored. */
export async function redactedTracks(blobs: BlobStore, prefix: string, turns: TurnText[], marked: string[] = []): Promise<RedactedTracks> {
  const [caller, agent, events] = await Promise.all([blobs.read(`${prefix}/caller`), blobs.read(`${prefix}/agent`), blobs.read(`${prefix}/events`)]);
  const spans = redactionSpans(caller ?? Buffer.alloc(0), parseEvents(events), turns, marked);
  return { caller: muted(caller ?? Buffer.alloc(0), spans), agent: muted(agent ?? Buffer.alloc(0), spans), spans };
}

/**
 * Renders a call's redacted recording once: both tracks muted over every span, stored beside the raw
 * ones with the list of spans (`redactions`: offsets and kinds, never the values). Only for a complete
 * recording (its meta's `ended_at` set): what is stored is served as the call's redacted audio for good.
 */
export async function renderRedacted(blobs: BlobStore, prefix: string, turns: TurnText[], marked: string[] = []): Promise<Redaction[]> {
  const r = await redactedTracks(blobs, prefix, turns, marked);
  await blobs.put(`${prefix}/redacted-caller`, r.caller);
  await blobs.put(`${prefix}/redacted-agent`, r.agent);
  // Written last: its presence says the rendering is complete.
  await blobs.put(`${prefix}/redactions`, Buffer.from(JSON.stringify(r.spans)));
  return r.spans;
}
