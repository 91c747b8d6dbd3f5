import { FRAME_SAMPLES, decode, type Codec } from '../rtp/codec.js';
import type { BlobStore } from '../../../store/blobs/mod.js';
import { RECORDING_RATE, recordingPrefix, type AnswerEvent, type RecordingEvent, type RecordingMeta } from '../../../actors/recording/mod.js';

type Direction = 'caller' | 'agent';

/**
 * How far the caller's RTP clock may put a frame from where its arrival would (samples): further, and the clock
 * is not this stream's any more (a new stream after a re-INVITE, a sender that restarted its timestamps, one
 * whose clock stopped while it sent nothing), so the frame is placed by its arrival and the clock set from it.
 * An event-loop stall that delays frames by more than this is placed by arrival too.
 */
const MAX_CLOCK_SKEW = 2 * RECORDING_RATE;

interface Track {
  /** Samples written (flushed or pending) so far. */
  written: number;
  pending: Int16Array[];
  chunk: number;
}

/**
 * One call's recorder: the caller's audio as the gateway heard it and the agent's as it was sent, each
 * on its own track of one timeline (a gap is filled with silence, so both parties speaking at once, barge-in,
 * stays two overlapping tracks). An agent's frame goes where the time it was sent puts it; a caller's where
 * its RTP timestamp does, on the clock set by its first frame's arrival: frames that reach the gateway late
 * (an event-loop stall, a network burst) are still placed when they were spoken, and the caller's track does
 * not drift later than the agent's. Every `chunkMs` what is pending becomes one durable chunk per track, so a
 * gateway that dies loses at most that much.
 */
export class CallRecorder {
  private readonly tracks: Record<Direction, Track> = { caller: { written: 0, pending: [], chunk: 0 }, agent: { written: 0, pending: [], chunk: 0 } };
  private events: RecordingEvent[] = [];
  /**
   * The agent's answer being sent (sample offsets), and whether its line in `events` is as it now stands: a
   * growing answer is written again at each flush, so a gateway that dies mid-answer still leaves where it began.
   */
  private answer: { start: number; end: number; text: string; written: boolean } | null = null;
  private eventChunk = 0;
  private writes: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  private ended = false;
  /** Set once the meta's `ended_at` is written after the last chunks: the recording is complete. */
  private complete = false;
  /** Set when the project's retention turns out to be 0: nothing is written. */
  private off = false;
  private meta: RecordingMeta | null = null;
  /** The caller's RTP clock: the timestamp of its last frame and where that frame belongs (samples). */
  private clock: { timestamp: number; at: number } | null = null;
  /** How late the caller's last frame arrived after the time its timestamp gives it (samples, at least 0). */
  private callerLag = 0;
  readonly prefix: string;
  /** The meta once written (the recording exists from then on), or null when nothing is recorded. */
  readonly started: Promise<RecordingMeta | null>;

  constructor(
    private readonly blobs: BlobStore,
    private readonly ids: Pick<RecordingMeta, 'conversation_id' | 'account_id' | 'project_id' | 'call_sid' | 'started_at'>,
    /** The expiry (epoch ms), known once the project's settings are read; null: do not record. */
    expiresAt: Promise<number | null>,
    private readonly chunkMs: number,
    private readonly log: (msg: string, extra: Record<string, unknown>) => void,
  ) {
    this.prefix = recordingPrefix(ids.account_id, ids.project_id, ids.conversation_id);
    let begun: (meta: RecordingMeta | null) => void = () => {};
    this.started = new Promise((resolve) => (begun = resolve));
    this.queue(async () => {
      let written: RecordingMeta | null = null;
      try {
        const expires = await expiresAt;
        if (expires === null) {
          this.off = true;
          return;
        }
        this.meta = Object.assign({}, ids, { ended_at: null, expires_at: expires });
        await blobs.put(`${this.prefix}/meta`, Buffer.from(JSON.stringify(this.meta)));
        written = this.meta;
      } finally {
        begun(written);
      }
    });
    this.timer = setInterval(() => this.flush(), chunkMs);
    this.timer.unref();
  }

  /**
   * A 20 ms frame of the agent's audio, sent at epoch ms `at` (the caller's go through `callerFrame`); `answer`, on
   * the first frame of each answer, is its label (`answerLabel` of its text), and the frames up to the next
   * answer's first are that answer's.
   */
  agentFrame(pcm: Int16Array, at: number, answer?: string): void {
    if (this.ended) return;
    // Send times jitter with the event loop: a frame up to a frame late is taken as following the previous one.
    const pos = this.place('agent', pcm, this.sampleAt(at) - pcm.length, FRAME_SAMPLES);
    if (answer !== undefined) {
      this.noteAnswer();
      this.answer = { start: pos, end: pos + pcm.length, text: answer, written: false };
    } else if (this.answer) {
      this.answer.end = pos + pcm.length;
      this.answer.written = false;
    }
  }

  /** The answer's line, if it changed since it was last written. */
  private noteAnswer(): void {
    const a = this.answer;
    if (!a || a.written) return;
    const ms = (samples: number) => Math.round((samples * 1000) / RECORDING_RATE);
    const line: AnswerEvent = { kind: 'answer', at_ms: ms(a.start), end_ms: ms(a.end), text: a.text };
    this.events.push(line);
    a.written = true;
  }

  /** A 20 ms frame of the caller's audio that arrived at epoch ms `at`, with its RTP `timestamp` (8 kHz units). */
  callerFrame(pcm: Int16Array, at: number, timestamp: number): void {
    if (this.ended) return;
    const arrival = this.sampleAt(at) - pcm.length;
    // The difference of two 32-bit timestamps, across their wrap.
    let pos = this.clock ? this.clock.at + ((timestamp - this.clock.timestamp) | 0) : arrival;
    if (Math.abs(pos - arrival) > MAX_CLOCK_SKEW) pos = arrival;
    this.clock = { timestamp, at: pos };
    this.callerLag = Math.max(0, arrival - pos);
    // The clock is exact: any gap is audio that never came (a lost packet), kept as silence.
    this.place('caller', pcm, pos, 0);
  }

  private sampleAt(at: number): number {
    return Math.round(((at - this.ids.started_at) * RECORDING_RATE) / 1000);
  }

  /**
   * Puts `pcm` on a track at sample `pos`: past the track's end by more than `tolerance`, after silence up to
   * there; before it (a burst that overlaps what is written), right after it, so nothing is ever dropped. Returns
   * where it was put.
   */
  private place(dir: Direction, pcm: Int16Array, pos: number, tolerance: number): number {
    const t = this.tracks[dir];
    if (pos - t.written > tolerance) {
      const gap = new Int16Array(pos - t.written);
      t.pending.push(gap);
      t.written += gap.length;
    }
    const at = t.written;
    t.pending.push(pcm);
    t.written += pcm.length;
    return at;
  }

  /** The agent's frame as sent (G.711 of the call's codec), with its answer's label on an answer's first frame. */
  sent(codec: Codec, payload: Buffer, at: number, answer?: string): void {
    this.agentFrame(decode(codec, payload), at, answer);
  }

  /**
   * A digit the caller keyed, arriving at epoch ms `at` with its RTP `timestamp`. A sender that keeps its
   * events on its audio's clock (RFC 4733's rule) has the digit placed by it, where the tone began, like its
   * frames. Otherwise (events on a clock of their own, more than MAX_CLOCK_SKEW away) it is placed where the
   * audio heard with it is: at its arrival less how late the caller's audio was last arriving (a digit delayed by
   * the same stall as the audio around it), or at the track's end when frames sent ahead of the clock (a burst)
   * have already put the caller's audio past that, so that its span mutes the audio heard with it.
   */
  digit(digit: string, at: number, timestamp: number): void {
    if (this.ended) return;
    const arrival = this.sampleAt(at);
    const onClock = this.clock ? this.clock.at + ((timestamp - this.clock.timestamp) | 0) : null;
    const pos = onClock !== null && Math.abs(onClock - arrival) <= MAX_CLOCK_SKEW ? onClock : Math.max(arrival - this.callerLag, this.tracks.caller.written);
    this.events.push({ kind: 'dtmf', digit, at_ms: Math.round((pos * 1000) / RECORDING_RATE) });
  }

  private queue(f: () => Promise<void>): void {
    this.writes = this.writes.then(f).catch((err) => this.log('recording write failed', { prefix: this.prefix, err: String(err) }));
  }

  private flush(): void {
    this.noteAnswer();
    for (const dir of ['caller', 'agent'] as const) {
      const t = this.tracks[dir];
      if (t.pending.length === 0) continue;
      const samples = t.pending;
      t.pending = [];
      const index = t.chunk++;
      this.queue(async () => {
        if (!this.off) await this.blobs.putChunk(`${this.prefix}/${dir}`, index, pcmBytes(samples));
      });
    }
    if (this.events.length) {
      const lines = this.events.map((e) => `${JSON.stringify(e)}\n`).join('');
      this.events = [];
      const index = this.eventChunk++;
      this.queue(async () => {
        if (!this.off) await this.blobs.putChunk(`${this.prefix}/events`, index, Buffer.from(lines));
      });
    }
  }

  /**
   * The call is over: the rest is written and the meta says when it ended. Resolves true once the
   * recording is complete (the last chunks, then the meta's `ended_at`, written: nothing more comes);
   * false when nothing was recorded (retention 0) or the meta could not be written.
   */
  async end(at: number): Promise<boolean> {
    if (!this.ended) {
      clearInterval(this.timer);
      // Both tracks run to the call's end: the silence after a party's last sound (a caller who says nothing,
      // then hangs up; the quiet the agent's stream sends between answers, which is not recorded frame by frame)
      // is part of the call. A track already past the end (a caller's frame placed by its timestamp ahead of the
      // clock, the agent's last frame sent as the call ended) sets the end for both: one length for every direction.
      const last = Math.max(this.sampleAt(at), this.tracks.caller.written, this.tracks.agent.written);
      for (const dir of ['caller', 'agent'] as const) {
        const t = this.tracks[dir];
        if (last > t.written) this.place(dir, new Int16Array(0), last, 0);
      }
      this.flush();
      this.ended = true;
      this.queue(async () => {
        if (this.off || !this.meta) return;
        await this.blobs.put(`${this.prefix}/meta`, Buffer.from(JSON.stringify({ ...this.meta, ended_at: at })));
        this.complete = true;
      });
    }
    await this.writes;
    return this.complete;
  }
}

/** Int16 frames as one little-endian byte buffer. */
export function pcmBytes(frames: Int16Array[]): Buffer {
  const n = frames.reduce((a, f) => a + f.length, 0);
  const out = Buffer.alloc(n * 2);
  let o = 0;
  for (const f of frames) for (let i = 0; i < f.length; i++, o += 2) out.writeInt16LE(f[i], o);
  return out;
}
