import { FRAME_SAMPLES, decode, type Codec } from '../rtp/codec.js';
import type { BlobStore } from '../../../store/blobs/mod.js';
import { RECORDING_RATE, recordingPrefix, type RecordingEvent, type RecordingMeta } from '../../../actors/recording/mod.js';

type Direction = 'caller' | 'agent';

interface Track {
  /** Samples written (flushed or pending) so far. */
  written: number;
  pending: Int16Array[];
  chunk: number;
}

/**
 * One call's recorder: the caller's audio as the gateway heard it and the agent's as it was sent, each
 * on its own track of one timeline (a frame goes where its arrival time puts it; a gap is filled with
 * silence, so both parties speaking at once, barge-in, stays two overlapping tracks). Every `chunkMs` what
 * is pending becomes one durable chunk per track, so a gateway that dies loses at most that much.
 */
export class CallRecorder {
  private readonly tracks: Record<Direction, Track> = { caller: { written: 0, pending: [], chunk: 0 }, agent: { written: 0, pending: [], chunk: 0 } };
  private events: RecordingEvent[] = [];
  private eventChunk = 0;
  private writes: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  private ended = false;
  /** Set once the meta's `ended_at` is written after the last chunks: the recording is complete. */
  private complete = false;
  /** Set when the project's retention turns out to be 0: nothing is written. */
  private off = false;
  private meta: RecordingMeta | null = null;
  readonly prefix: string;

  constructor(
    private readonly blobs: BlobStore,
    private readonly ids: Pick<RecordingMeta, 'conversation_id' | 'account_id' | 'project_id' | 'call_sid' | 'started_at'>,
    /** The expiry (epoch ms), known once the project's settings are read; null: do not record. */
    expiresAt: Promise<number | null>,
    private readonly chunkMs: number,
    private readonly log: (msg: string, extra: Record<string, unknown>) => void,
  ) {
    this.prefix = recordingPrefix(ids.account_id, ids.project_id, ids.conversation_id);
    this.queue(async () => {
      const expires = await expiresAt;
      if (expires === null) {
        this.off = true;
        return;
      }
      this.meta = Object.assign({}, ids, { ended_at: null, expires_at: expires });
      await blobs.put(`${this.prefix}/meta`, Buffer.from(JSON.stringify(this.meta)));
    });
    this.timer = setInterval(() => this.flush(), chunkMs);
    this.timer.unref();
  }

  /** A 20 ms frame of one party at epoch ms `at`. */
  frame(dir: Direction, pcm: Int16Array, at: number): void {
    if (this.ended) return;
    const t = this.tracks[dir];
    const pos = Math.round(((at - this.ids.started_at) * RECORDING_RATE) / 1000) - pcm.length;
    // Late by more than a frame: silence up to where this frame belongs. Early (a burst from the jitter
    // buffer): right after the previous frame, so nothing is ever dropped.
    if (pos - t.written > FRAME_SAMPLES) {
      const gap = new Int16Array(pos - t.written);
      t.pending.push(gap);
      t.written += gap.length;
    }
    t.pending.push(pcm);
    t.written += pcm.length;
  }

  /** The agent's frame as sent (G.711 of the call's codec). */
  sent(codec: Codec, payload: Buffer, at: number): void {
    this.frame('agent', decode(codec, payload), at);
  }

  /**
   * A digit the caller keyed, arriving at epoch ms `at`, placed on the caller's track as a frame arriving
   * then would be: at its arrival time, or at the track's end when early frames (a burst) have already put
   * the caller's audio past it, so that its span mutes the audio heard with it.
   */
  digit(digit: string, at: number): void {
    if (this.ended) return;
    const trackMs = (this.tracks.caller.written * 1000) / RECORDING_RATE;
    this.events.push({ kind: 'dtmf', digit, at_ms: Math.max(at - this.ids.started_at, Math.round(trackMs)) });
  }

  private queue(f: () => Promise<void>): void {
    this.writes = this.writes.then(f).catch((err) => this.log('recording write failed', { prefix: this.prefix, err: String(err) }));
  }

  private flush(): void {
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
