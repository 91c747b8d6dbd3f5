import { FRAME_MS } from './rtp/codec.js';

export interface TurnTakingOptions {
  /** RMS level (16-bit scale) above which a frame counts as speech. */
  speechLevel: number;
  /** Speech starts after this much voiced audio in a row. */
  speechStartMs: number;
  /** An utterance ends after this much silence. */
  endSilenceMs: number;
  /** With nothing heard this long after the agent finished speaking, a silence turn is taken. */
  noInputMs: number;
  /** DTMF digits are collected until this long passes without another (or `#` is pressed). */
  interDigitMs: number;
  /** The longest utterance kept (longer speech is cut into turns of this length). */
  maxUtteranceMs: number;
}

export const DEFAULT_TURN_TAKING: TurnTakingOptions = { speechLevel: 600, speechStartMs: 60, endSilenceMs: 700, noInputMs: 8000, interDigitMs: 1500, maxUtteranceMs: 15_000 };

/** What the caller did, as one turn. */
export type CallerTurn =
  | { kind: 'speech'; pcm: Int16Array; bargeIn: boolean; endedAt: number }
  | { kind: 'dtmf'; digits: string; bargeIn: boolean; endedAt: number }
  | { kind: 'silence'; endedAt: number };

const PREROLL_FRAMES = 10;
/** The most DTMF digits one turn holds (a card number with its expiry and code fits several times over). */
const MAX_DIGITS = 64;

/**
 * Turn-taking on the caller's audio: an energy voice-activity detector finds utterances (start after a
 * short run of voiced frames, end after `endSilenceMs` of silence, with a little audio kept from before the
 * start so the first syllable is not clipped), DTMF digits are gathered into one turn, and a caller who
 * says nothing for `noInputMs` after the agent finished gives a silence turn. Speech or a key while the
 * agent is speaking is barge-in: `onBargeIn` stops the playback and the turn says so. While the far end holds
 * the call (`hold`) its audio is not listened to.
 */
export class TurnTaking {
  private frames: Int16Array[] = [];
  private preroll: Int16Array[] = [];
  private voicedRun = 0;
  private silentRun = 0;
  private inSpeech = false;
  private bargeIn = false;
  private digits = '';
  private digitTimer: NodeJS.Timeout | null = null;
  private noInputTimer: NodeJS.Timeout | null = null;
  /** The no-input clock should run: the agent is done and the caller has not taken a turn since (`agentDone`). */
  private awaitingCaller = false;
  /** The far end holds the call (`hold`): the no-input clock is stopped, and its audio makes no turns. */
  private held = false;
  /** `awaitingCaller` as it was when the utterance in progress started: what a hold that drops it goes back to. */
  private awaitingBeforeSpeech = false;
  private gapTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly o: TurnTakingOptions,
    private readonly agentSpeaking: () => boolean,
    private readonly onBargeIn: () => void,
    private readonly onTurn: (t: CallerTurn) => void,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The agent finished speaking: the caller's no-input clock starts. */
  agentDone(): void {
    this.armNoInput();
  }

  /** The agent started an answer: no silence turn while it speaks or thinks. */
  agentBusy(): void {
    this.awaitingCaller = false;
    if (this.noInputTimer) clearTimeout(this.noInputTimer);
    this.noInputTimer = null;
  }

  /**
   * The far end holds the call (its SDP takes no audio: `sendonly`, `inactive`): no silence turn until `resume`.
   * Nobody is there to answer, and what the agent said would wait for the hold's end (`RtpSession` sends nothing
   * meanwhile): a caller taken back off hold was met with the agent asking whether anyone was there, and the silence
   * turns counted against a caller who was only on hold.
   * Nor does what the far end sends meanwhile make turns (`audio`): in `sendonly` that is hold music or a PBX's
   * announcements, not a caller, and the energy detector took the music for speech: turns the agent answered into
   * the hold, and barge-in that cut its queued words. An utterance under way when the hold begins is dropped: cut
   * off, and likely running into the music.
   */
  hold(): void {
    this.held = true;
    if (this.noInputTimer) clearTimeout(this.noInputTimer);
    this.noInputTimer = null;
    if (this.gapTimer) clearTimeout(this.gapTimer);
    this.gapTimer = null;
    // A dropped utterance is no turn: the caller is still awaited as before it began (or, having cut the agent
    // off, now that nothing plays), and the no-input clock runs again at `resume`.
    if (this.inSpeech) this.awaitingCaller = this.awaitingBeforeSpeech || this.bargeIn;
    this.frames = [];
    this.preroll = [];
    this.inSpeech = false;
    this.voicedRun = 0;
    this.silentRun = 0;
    this.bargeIn = false;
  }

  /** The far end takes the call back: its audio is listened to again, and the no-input clock, if it was running, starts afresh. */
  resume(): void {
    if (!this.held) return;
    this.held = false;
    if (this.awaitingCaller) this.armNoInput();
  }

  private armNoInput(): void {
    if (this.closed) return;
    this.awaitingCaller = true;
    if (this.noInputTimer) clearTimeout(this.noInputTimer);
    this.noInputTimer = null;
    if (this.held) return;
    this.noInputTimer = setTimeout(() => {
      this.noInputTimer = null;
      this.awaitingCaller = false;
      if (!this.inSpeech && !this.digits) this.onTurn({ kind: 'silence', endedAt: this.clock() });
    }, this.o.noInputMs);
  }

  private noteBargeIn(): void {
    if (this.agentSpeaking()) {
      this.bargeIn = true;
      this.onBargeIn();
    }
  }

  audio(pcm: Int16Array): void {
    if (this.closed || this.held) return;
    let sum = 0;
    for (let i = 0; i < pcm.length; i++) sum += pcm[i] * pcm[i];
    const voiced = Math.sqrt(sum / (pcm.length || 1)) >= this.o.speechLevel;
    if (!this.inSpeech) {
      this.preroll.push(pcm);
      if (this.preroll.length > PREROLL_FRAMES) this.preroll.shift();
      this.voicedRun = voiced ? this.voicedRun + 1 : 0;
      if (this.voicedRun * FRAME_MS >= this.o.speechStartMs) {
        this.inSpeech = true;
        this.silentRun = 0;
        this.frames = [...this.preroll];
        this.preroll = [];
        this.awaitingBeforeSpeech = this.awaitingCaller;
        this.agentBusy();
        this.noteBargeIn();
        this.armGap();
      }
      return;
    }
    this.frames.push(pcm);
    this.silentRun = voiced ? 0 : this.silentRun + 1;
    if (this.silentRun * FRAME_MS >= this.o.endSilenceMs || this.frames.length * FRAME_MS >= this.o.maxUtteranceMs) this.endUtterance(this.silentRun * FRAME_MS);
    else this.armGap();
  }

  /**
   * A far end with silence suppression sends nothing while its caller is quiet: no audio at all for
   * `endSilenceMs` in the middle of an utterance ends it like that much silence would.
   */
  private armGap(): void {
    if (this.gapTimer) clearTimeout(this.gapTimer);
    this.gapTimer = setTimeout(() => {
      this.gapTimer = null;
      if (this.inSpeech && !this.closed) this.endUtterance(this.o.endSilenceMs);
    }, this.o.endSilenceMs);
  }

  private endUtterance(silentMs: number): void {
    if (this.gapTimer) clearTimeout(this.gapTimer);
    this.gapTimer = null;
    {
      const n = this.frames.reduce((a, f) => a + f.length, 0);
      const all = new Int16Array(n);
      let off = 0;
      for (const f of this.frames) {
        all.set(f, off);
        off += f.length;
      }
      const bargeIn = this.bargeIn;
      this.frames = [];
      this.inSpeech = false;
      this.voicedRun = 0;
      this.bargeIn = false;
      // The end of speech was the first silent frame of the run.
      this.onTurn({ kind: 'speech', pcm: all, bargeIn, endedAt: this.clock() - silentMs });
    }
  }

  digit(d: string): void {
    if (this.closed) return;
    this.agentBusy();
    if (!this.digits) this.noteBargeIn();
    if (this.digitTimer) clearTimeout(this.digitTimer);
    if (d === '#' && this.digits) return this.flushDigits();
    this.digits += d;
    // A turn holds at most `MAX_DIGITS`: a caller (or a sender) keying on without a pause makes turns of that
    // many, not one input that grows for as long as digits keep coming.
    if (this.digits.length >= MAX_DIGITS) return this.flushDigits();
    this.digitTimer = setTimeout(() => this.flushDigits(), this.o.interDigitMs);
  }

  private flushDigits(): void {
    if (this.digitTimer) clearTimeout(this.digitTimer);
    this.digitTimer = null;
    const digits = this.digits;
    const bargeIn = this.bargeIn;
    this.digits = '';
    this.bargeIn = false;
    if (digits) this.onTurn({ kind: 'dtmf', digits, bargeIn, endedAt: this.clock() });
  }

  close(): void {
    this.closed = true;
    if (this.digitTimer) clearTimeout(this.digitTimer);
    if (this.noInputTimer) clearTimeout(this.noInputTimer);
    if (this.gapTimer) clearTimeout(this.gapTimer);
  }
}
