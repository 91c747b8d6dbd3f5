import { FRAME_MS, type Codec } from './rtp/codec.js';
import { packetize } from './rtp/packetizer.js';
import type { RtpSession } from './rtp/session.js';
import { spokenPieces } from './speech/pieces.js';
import type { TextToSpeech, VoiceSettings } from './speech/types.js';

/**
 * How much of an answer's audio is queued ahead when its next piece is synthesized: time enough for the
 * synthesis (espeak-ng takes a fraction of a second for a piece, a speech service a round trip), so the pieces
 * play without a gap, while no more than about two pieces of audio are held at once.
 */
export const SPEECH_LEAD_MS = 5000;

/** The longest a wait for the queue to drain sleeps before it looks again whether the answer is still wanted. */
const WAKE_MS = 250;

export interface SpeakerDeps {
  tts: TextToSpeech;
  voice: VoiceSettings;
  codec: Codec;
  rtp: Pick<RtpSession, 'play' | 'queued' | 'stopPlayback'>;
  log: (level: 'debug' | 'info' | 'warn', msg: string, extra?: Record<string, unknown>) => void;
}

/**
 * Speaks a call's answers: each answer's text cut to what a call speaks and into pieces (`speech/pieces.ts`),
 * each piece synthesized when the audio queued ahead of it is down to `SPEECH_LEAD_MS`, then queued behind it on
 * the call's stream. So no synthesis, WAV or resampling is larger than a piece's, a call holds about two
 * pieces of audio however long its answer, and the main thread converts one piece at a time (an answer's whole
 * text was synthesized at once, and a long one stalled every call and chat of the process for seconds).
 */
export class Speaker {
  /** Bumped by `cut`: an answer being spoken stops when it changes. */
  private cuts = 0;

  constructor(private readonly d: SpeakerDeps) {}

  /**
   * Speaks `text` (its recording label `label` on its first frame); resolves once its last piece is queued, or
   * once it stopped: cut (barge-in), no longer `wanted` (the call ended), or a piece's synthesis failed (logged;
   * the rest of the answer is not spoken).
   */
  async say(text: string, label: string, wanted: () => boolean): Promise<void> {
    const { pieces, spokenChars, truncated } = spokenPieces(text);
    if (truncated) this.d.log('warn', 'answer too long to speak: its end is not spoken', { chars: text.length, spoken_chars: spokenChars });
    const cut = this.cuts;
    const going = () => this.cuts === cut && wanted();
    const lead = Math.ceil(SPEECH_LEAD_MS / FRAME_MS);
    for (let i = 0; i < pieces.length; i++) {
      while (going() && this.d.rtp.queued > lead) await new Promise((r) => setTimeout(r, Math.min(WAKE_MS, (this.d.rtp.queued - lead) * FRAME_MS)));
      if (!going()) return;
      const pcm = await this.d.tts.synthesize(pieces[i]!, this.d.voice).catch((err) => {
        this.d.log('warn', 'speech synthesis failed', { err: String(err), piece: i });
        return null;
      });
      if (!pcm || !going()) return;
      this.d.rtp.play(packetize(this.d.codec, pcm), i === 0 ? label : null);
    }
  }

  /** Stops what is being said: its queued audio is dropped and its pieces not yet synthesized are not (barge-in). */
  cut(): void {
    this.cuts++;
    this.d.rtp.stopPlayback();
  }
}
