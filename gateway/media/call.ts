import { bridgeEnded } from '../../actors/conversation/mod.js';
import type { ActorClient } from '../../actors/mod.js';
import type { ConversationEvent, ConversationStart, Outcome } from '../../machines/conversation.js';
import { answerLabel } from '../../actors/recording/mod.js';
import { Bridge, type BridgeAttempt, type BridgeEnd } from './bridge.js';
import type { Dialog } from './dialog.js';
import { Speaker } from './speaker.js';
import type { Codec } from './rtp/codec.js';
import type { RtpSession } from './rtp/session.js';
import type { SpeechHints, SpeechToText, TextToSpeech, VoiceSettings } from './speech/types.js';
import { TurnTaking, type CallerTurn, type TurnTakingOptions } from './turn-taking.js';

type Reply = Outcome & { state?: string };

export interface CallDeps {
  client: ActorClient;
  tts: TextToSpeech;
  stt: SpeechToText;
  turnTaking: TurnTakingOptions;
  /** A call whose far end sends no RTP for this long is hung up: its caller is gone without a BYE. */
  mediaTimeoutMs: number;
  /** How long an ask other than a turn (the close, a bridge's end) may take, retries over a worker failover included. */
  askTimeoutMs: number;
  /**
   * How long the start's and each caller turn's ask may take: as long as the agent may take to answer (the model's
   * longest reply and the hooks, `Config.turnWaitMs`), a worker failover included. A turn given up before the
   * agent answers went on without its caller: its answer was never spoken, and the caller heard nothing.
   */
  turnWaitMs: number;
  log: (level: 'debug' | 'info' | 'warn', msg: string, extra?: Record<string, unknown>) => void;
  /** End of caller speech → first agent audio packet, per answered turn (the benchmark reads it). */
  onResponseLatency?: (ms: number) => void;
}

export interface CallSetup {
  conversationId: string;
  callSid: string;
  start: ConversationStart;
  codec: Codec;
  voice: VoiceSettings;
  hints: SpeechHints;
  dialog: Dialog;
  rtp: RtpSession;
  /**
   * Called once when the call is over (either side hung up, or the agent ended or transferred it); what it
   * returns (the recording being finished) is awaited before the conversation is closed.
   */
  onEnded: (how: CallEnd) => void | Promise<unknown>;
  /**
   * Set when the call's trunk bridges handoffs (`transfer: bridge`): calls a REFER target (`referTarget`) as the
   * bridge's B leg; null when it cannot be called so (the handoff is then a REFER). Null: handoffs are REFERs.
   */
  bridge: ((target: string) => BridgeAttempt | null) | null;
}

export interface CallEnd {
  reason: 'caller_hangup' | 'agent_end' | 'handoff' | 'failed' | 'media_timeout';
  at: number;
}

/**
 * One call on the media gateway: the bridge between a SIP dialog with its RTP stream and the conversation
 * actor, which holds every bit of state. The call starts the conversation, then turns each caller turn
 * (speech, digits, silence) into one ask and speaks the answer. Each ask carries an event id fixed by the
 * turn's number, so an ask retried across a worker failover is applied once; the caller hears nothing of
 * the failover but a longer pause.
 */
export class VoiceCall {
  private readonly turns: TurnTaking;
  private readonly speech: Speaker;
  private turnNo = 0;
  private chain: Promise<void> = Promise.resolve();
  private ended = false;
  private closing = false;
  /** When the caller's last turn ended, until the first packet of the answer goes out. */
  private awaitingFirstPacket: number | null = null;
  /** Checks that the far end still sends media (`CallDeps.mediaTimeoutMs`). */
  private readonly mediaWatch: ReturnType<typeof setInterval>;
  /** When the call was connected: a bridge's `call_duration_seconds` counts from here. */
  private readonly connectedAt = Date.now();
  /** A bridged transfer's B leg while it rings: cancelled when the caller hangs up meanwhile. */
  private ringing: BridgeAttempt | null = null;
  /** Once a bridged transfer was answered: the two legs relayed. */
  private bridged: Bridge | null = null;
  /** A handoff in progress (a REFER, or a bridge until it ends and is reported). */
  private transferring: Promise<void> | null = null;
  /** When the call's own media ended (`finish`). */
  private endedAt: number | null = null;
  private settle!: () => void;
  /** Resolves once nothing of the call is up any more: its media closed, or its bridge ended. */
  readonly over = new Promise<void>((resolve) => (this.settle = resolve));

  constructor(private readonly d: CallDeps, private readonly s: CallSetup) {
    this.speech = new Speaker({ tts: d.tts, voice: s.voice, codec: s.codec, rtp: s.rtp, log: (level, msg, extra) => d.log(level, msg, Object.assign({ call_sid: s.callSid }, extra)) });
    this.turns = new TurnTaking(d.turnTaking, () => s.rtp.playing, () => this.speech.cut(), (t) => this.enqueue(t));
    s.rtp.onDrained = () => {
      if (!this.closing) this.turns.agentDone();
    };
    const previousTap = s.rtp.onSent;
    s.rtp.onSent = (frame, answer) => {
      if (this.awaitingFirstPacket !== null) {
        const ms = Date.now() - this.awaitingFirstPacket;
        d.onResponseLatency?.(ms);
        d.log('debug', 'voice turn answered', { call_sid: s.callSid, response_latency_ms: ms });
        this.awaitingFirstPacket = null;
      }
      previousTap?.(frame, answer);
    };
    s.dialog.onBye = () => void this.hungUp();
    // A far end that holds the call hears nothing of ours: the agent does not speak up into the hold (no silence
    // turns), what it sends meanwhile (hold music) makes no turns, and the no-input clock starts afresh when the
    // call is taken back. Held already: an INVITE that offered `sendonly`, or a re-INVITE before the call was made.
    s.rtp.onFarEndReceives = (receives) => (receives ? this.turns.resume() : this.turns.hold());
    if (!s.rtp.farEndReceives) this.turns.hold();
    // A phone keeps sending RTP (silence too) for as long as the call lasts; when none has come for the timeout,
    // the far end is gone without a BYE (a crash, a lost network): the call is hung up, as it would otherwise
    // take silence turns and hold its trunk line and its concurrency slot forever. Not while it holds the call
    // (its SDP says it sends nothing, or only what it may not: `RtpSession.silentForMs`).
    this.mediaWatch = setInterval(() => {
      if (this.ended || s.rtp.silentForMs() < d.mediaTimeoutMs) return;
      d.log('info', 'call hung up: no media from the far end', { call_sid: s.callSid, timeout_ms: d.mediaTimeoutMs });
      void this.hangUp('media_timeout');
    }, Math.min(5000, Math.max(250, d.mediaTimeoutMs / 4)));
    this.mediaWatch.unref?.();
  }

  /** Feeds the caller's audio and digits from the RTP session. */
  audio(pcm: Int16Array): void {
    this.turns.audio(pcm);
  }
  digit(d: string): void {
    this.turns.digit(d);
  }

  private ask(event: ConversationEvent, eventId: string): Promise<Reply> {
    // The start and a turn run the agent (functions, the model): waited for as long as it may take. While it
    // thinks the caller hears the stream's silence, and no silence turn is taken (`TurnTaking.agentBusy`).
    const timeoutMs = event.type === 'START' || event.type === 'MESSAGE' ? this.d.turnWaitMs : this.d.askTimeoutMs;
    return this.d.client.ask<Reply>('conversation', this.s.conversationId, event as ConversationEvent & Record<string, unknown>, { eventId, timeoutMs });
  }

  /**
   * Starts the conversation (after the call is connected: the start function runs now) and speaks its opening.
   * On the turn chain: a caller's first turn is asked after it, and a hang-up while the agent prepares its opening
   * closes the conversation once the start is done (the machine takes CLOSE only between turns; asked meanwhile,
   * the CLOSE waited behind the start in the mailbox and was dropped there when its ask gave up, leaving the
   * conversation in progress until its idle timeout).
   */
  start(): Promise<void> {
    const started = this.chain.then(() => this.opening());
    this.chain = started;
    return started;
  }

  private async opening(): Promise<void> {
    try {
      const reply = await this.ask({ type: 'START', start: this.s.start }, `${this.s.callSid}:start`);
      if (!reply.ok) throw new Error(`conversation refused the start: ${reply.error}`);
      await this.answer(reply);
    } catch (err) {
      this.d.log('warn', 'call could not start its conversation', { call_sid: this.s.callSid, err: String(err) });
      await this.hangUp('failed');
    }
  }

  private enqueue(t: CallerTurn): void {
    if (this.ended || this.closing) return;
    this.turns.agentBusy();
    this.chain = this.chain.then(() => this.turn(t)).catch((err) => {
      this.d.log('warn', 'call turn failed', { call_sid: this.s.callSid, err: String(err) });
      this.turns.agentDone();
    });
  }

  private async turn(t: CallerTurn): Promise<void> {
    if (this.ended || this.closing) return;
    const n = ++this.turnNo;
    let message = '';
    let voice: { dtmf?: string; bargeIn?: boolean; silence?: boolean };
    if (t.kind === 'speech') {
      message = await this.d.stt.transcribe(t.pcm, this.s.hints).catch((err) => {
        this.d.log('warn', 'speech recognition failed', { call_sid: this.s.callSid, err: String(err) });
        return '';
      });
      // Heard something but recognised nothing: a turn all the same (the agent asks again).
      voice = { bargeIn: t.bargeIn };
    } else if (t.kind === 'dtmf') {
      voice = { dtmf: t.digits, bargeIn: t.bargeIn };
    } else {
      voice = { silence: true };
    }
    if (this.ended) return;
    this.awaitingFirstPacket = t.endedAt;
    const reply = await this.ask(
      { type: 'MESSAGE', message, metadata: {}, integrationAttributes: {}, voice, at: Date.now() },
      `${this.s.callSid}:turn:${n}`,
    );
    if (!reply.ok) {
      // Ended or handed off meanwhile (a CLOSE from elsewhere): the call is over.
      await this.hangUp('agent_end');
      return;
    }
    await this.answer(reply);
  }

  /** Speaks an answer; then hangs up, transfers, or waits for the caller. */
  private async answer(reply: Extract<Reply, { ok: true }>): Promise<void> {
    // Labelled with its text's digest: the recording marks where each answer was spoken, so that the redacted
    // rendering can mute an answer that holds personal data (docs/recordings.md). Spoken piece by piece (`Speaker`).
    if (reply.response) await this.speech.say(reply.response, answerLabel(reply.response), () => !this.ended);
    if (reply.handoff) {
      // Not awaited: the transfer outlives the turn or the start that asked for it (a bridge lasts as long as
      // the bridged call), and nothing after it may fail the turn.
      this.transferring = this.transfer(reply.handoff.destination).catch((err) => {
        this.d.log('warn', 'call transfer failed', { call_sid: this.s.callSid, err: String(err) });
        // Bridged already: the bridge's own end hangs up; `hangUp` would wait for this very promise.
        return this.bridged ? undefined : this.hangUp('handoff');
      });
      return;
    }
    if (reply.end) return this.finishAfterPlayback('agent_end');
    if (!this.s.rtp.playing) this.turns.agentDone();
  }

  private async waitForPlayback(): Promise<void> {
    while (this.s.rtp.playing && !this.ended) await new Promise((r) => setTimeout(r, 40));
  }

  private async finishAfterPlayback(reason: CallEnd['reason']): Promise<void> {
    this.closing = true;
    await this.waitForPlayback();
    await this.hangUp(reason);
  }

  /**
   * Handoff: after the goodbye line, a blind transfer (REFER) to the destination when it is a SIP URI or a
   * number; the call leaves the platform once the far end accepted it. A far end that refuses the REFER
   * (or a destination that is only a queue name) gets a BYE: the handoff is recorded all the same.
   * On a trunk that bridges handoffs, the destination is called and bridged instead (`bridgeTo`).
   */
  private async transfer(destination: string): Promise<void> {
    this.closing = true;
    await this.waitForPlayback();
    if (this.ended) return;
    const target = referTarget(destination);
    const attempt = target && this.s.bridge ? this.s.bridge(target) : null;
    if (attempt) return this.bridgeTo(target!, attempt);
    if (target) {
      const status = await this.s.dialog.refer(target);
      this.d.log('info', 'call transferred', { call_sid: this.s.callSid, destination: target, status });
      if (status >= 200 && status < 300) {
        // The far end now calls the target and hangs up on us (RFC 5589); if it does not, we do.
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
    await this.hangUp('handoff');
  }

  /**
   * A bridged transfer: while the destination rings the caller stays on the line (the agent's stream goes on
   * with silence). Answered, the agent's part of the call is over (its recording ends, the conversation closes
   * as after a REFER) and the two legs are relayed to each other until either hangs up. Unanswered (or the
   * caller gone meanwhile), the caller gets a BYE as after a refused REFER. Either way the conversation is told
   * once, through the bridge-ended path (`bridgeEnded`): `bridge_duration_seconds` from the destination's answer
   * (0 when it never answered) and `call_duration_seconds` from the call's connection, to the bridge's end.
   */
  private async bridgeTo(target: string, attempt: BridgeAttempt): Promise<void> {
    this.ringing = attempt;
    const leg = await attempt.outcome.catch((err: unknown) => ({ ok: false as const, reason: String(err) }));
    this.ringing = null;
    let endedAt: number;
    let answeredAt: number | null = null;
    if (!leg.ok || this.ended) {
      if (leg.ok) {
        // Not waited for: a destination gone silent never answers our BYE, and the report would wait 32 s for it.
        void leg.dialog.bye();
        leg.rtp.close();
      }
      this.d.log('info', 'bridged transfer not answered', { call_sid: this.s.callSid, destination: target, reason: leg.ok ? 'the caller hung up' : leg.reason });
      await this.hangUp('handoff');
      // When the call ended (the caller's BYE, or ours now), not when our BYE was answered.
      endedAt = this.endedAt ?? Date.now();
    } else {
      answeredAt = Date.now();
      const bridge = new Bridge({ dialog: this.s.dialog, rtp: this.s.rtp }, leg, this.d.mediaTimeoutMs);
      this.bridged = bridge;
      this.d.log('info', 'call bridged', { call_sid: this.s.callSid, destination: target });
      // The agent's part is over: the media stays up, relayed; the recording ends and the conversation closes.
      await this.finish('handoff', { keepMedia: true });
      await this.ask({ type: 'CLOSE', at: Date.now() }, `${this.s.callSid}:close`).catch(() => {});
      const end: BridgeEnd = await bridge.ended;
      endedAt = end.at;
      this.settle();
      this.d.log('info', 'bridged call ended', { call_sid: this.s.callSid, by: end.by });
    }
    const seconds = (from: number) => Math.max(0, Math.round(endedAt - from)) / 1000;
    const bridge = { bridge_duration_seconds: answeredAt === null ? 0 : seconds(answeredAt), call_duration_seconds: seconds(this.connectedAt) };
    await bridgeEnded(this.d.client, this.s.conversationId, bridge, { eventId: `${this.s.callSid}:bridge-ended`, timeoutMs: this.d.askTimeoutMs }).catch((err) =>
      this.d.log('warn', 'could not tell the conversation that its bridged call ended', { call_sid: this.s.callSid, err: String(err) }),
    );
  }

  /** The caller hung up: the conversation is closed. */
  private async hungUp(): Promise<void> {
    if (this.ended) return;
    const recorded = this.finish('caller_hangup');
    // A turn still in flight first: the machine takes CLOSE only between turns. The recording is finished
    // first too, so that the conversation ends on a complete recording.
    await Promise.all([this.chain.catch(() => {}), recorded]);
    await this.ask({ type: 'CLOSE', at: Date.now() }, `${this.s.callSid}:close`).catch((err) =>
      this.d.log('warn', 'could not close the conversation of a call', { call_sid: this.s.callSid, err: String(err) }),
    );
  }

  /** We hang up (agent ended, transfer done, failure); the conversation is closed if it is not already. */
  async hangUp(reason: CallEnd['reason']): Promise<void> {
    // A bridged call outlives its agent's part: the gateway's shutdown hangs up both legs, and waits for the
    // conversation to be told of the bridge's end (told as the BYEs go out; `MediaGateway.close` waits for their answers).
    if (this.bridged) {
      this.bridged.end('shutdown');
      await this.transferring;
      return;
    }
    if (this.ended) return;
    const recorded = this.finish(reason);
    // The call ends when our BYE goes out, not when it is answered: a far end that is gone (the media timeout's very
    // case) answers nothing, and the conversation (its duration, the concurrency series) would end 32 s late, when
    // the BYE's transaction gives up. The transaction finishes on its own; `bye` never rejects.
    const at = Date.now();
    void this.s.dialog.bye();
    await recorded;
    // Called at the end of a turn (its ask answered) or outside one: the conversation takes CLOSE now.
    await this.ask({ type: 'CLOSE', at }, `${this.s.callSid}:close`).catch(() => {});
  }

  /**
   * The call's media is over (or, `keepMedia`, handed to a bridge); resolves once what `onEnded` started (the
   * recording's last writes) is done.
   */
  private finish(reason: CallEnd['reason'], o: { keepMedia?: boolean } = {}): Promise<void> {
    this.ended = true;
    this.endedAt = Date.now();
    clearInterval(this.mediaWatch);
    this.turns.close();
    this.ringing?.cancel();
    if (!o.keepMedia) {
      this.s.rtp.close();
      this.settle();
    }
    return Promise.resolve(this.s.onEnded({ reason, at: Date.now() })).then(
      () => {},
      () => {},
    );
  }
}

/** A handoff destination as a REFER target: a SIP URI as it is, a phone number as `tel:`; else none. */
export function referTarget(destination: string): string | null {
  const d = destination.trim();
  if (/^sips?:[^\s<>]+$/i.test(d)) return d;
  if (/^\+?[0-9]{3,15}$/.test(d)) return `tel:${d}`;
  return null;
}
