import { randomUUID } from 'node:crypto';
import { runningContent } from '../../actors/conversation/mod.js';
import type { Runtime } from '../../actors/mod.js';
import type { Builder } from '../../builder/mod.js';
import type { ConversationStart } from '../../machines/conversation.js';
import { uuidv7 } from '../../platform/ids.js';
import type { DialTrunk } from '../../actors/call/mod.js';
import { bridgeTargetOf, dialBridgeLeg } from './bridge.js';
import { VoiceCall, type CallEnd } from './call.js';
import { extraHeaders, SipEndpoint, userOf, type Dialog, type IncomingInvite } from './dialog.js';
import { hintsOf } from './hints.js';
import { answerOf, choose, followReinvites, offerOf, openLeg, readSdp, sessionOf, takeAnswer, type MediaLeg } from './media.js';
import type { MediaDescription } from './sdp.js';
import type { Codec } from './rtp/codec.js';
import type { RtpSession } from './rtp/session.js';
import { Pacer } from './rtp/pacer.js';
import { RtpPorts, RtpPortsExhausted } from './rtp/ports.js';
import { DEFAULT_VOICE, type SpeechToText, type TextToSpeech, type VoiceSettings } from './speech/types.js';
import type { TurnTakingOptions } from './turn-taking.js';
import type { MediaConfig } from '../../platform/config.js';
import type { Recordings } from './recordings/recordings.js';

/**
 * How long a shutdown waits for the answers to its BYEs (`MediaGateway.close`): over UDP a BYE is sent at 0, 0.5, 1.5
 * and 3.5 s (RFC 3261 17.1.2, T1 = 500 ms), so a far end that lost the first copies still gets one; a far end that is
 * gone answers none, and its transaction would hold the shutdown for 32 s.
 */
const CLOSE_BYE_WAIT_MS = 4000;

/** The phone-number binding an INVITE's number resolves to (builder/telephony.ts). */
export interface NumberBinding {
  account_id: string;
  agent_id: string;
  number: string;
  variant_id: string | null;
  /** The telephony connector (trunk) the number is on. */
  connector_id: string;
}

/** The telephony lookups the media gateway needs. */
export interface TelephonyLookup {
  numberByE164(e164: string): Promise<NumberBinding | null>;
  /** A connector's trunk, or null when it is gone. */
  trunk(connectorId: string): Promise<DialTrunk | null>;
}

export interface MediaGatewayOptions {
  /** The address SIP and RTP listen on and that SDP and Contact name (HOST). */
  host: string;
  sipPort: number;
  /** TLS listener (SIP over TLS) with its certificate; null: no TLS. */
  tls: { port: number; key: string | Buffer; cert: string | Buffer; verifyPeer: boolean } | null;
  rtpPortMin: number;
  rtpPortMax: number;
  builder: Builder;
  telephony: TelephonyLookup;
  runtime: Runtime;
  tts: TextToSpeech;
  stt: SpeechToText;
  turnTaking: TurnTakingOptions;
  /** A call whose far end sends no RTP for this long is hung up (its caller is gone without a BYE). */
  mediaTimeoutMs: number;
  conversationIdleMs: number;
  /** How long an ask keeps retrying (a worker failover included): a call's close, a bridge's end. */
  askTimeoutMs: number;
  /** How long the start's and a caller turn's ask wait for the agent (`CallDeps.turnWaitMs`). */
  turnWaitMs: number;
  log: (level: 'debug' | 'info' | 'warn', msg: string, extra?: Record<string, unknown>) => void;
  /** Records every call per direction (gateway/media/recordings); absent: nothing is recorded. */
  recordings?: Recordings | null;
  /** How long a bridged transfer's destination may ring (`VOICE_TRANSFER_RING_TIMEOUT_MS`). */
  transferRingTimeoutMs: number;
  /** INVITEs from one address not yet answered or ACKed; more are refused (`SipEndpointOptions`). */
  pendingInvitesPerAddress?: number;
}

/** Where an inbound call's RTP session hands the caller's audio and digits (the call, once it is made). */
type RtpSink = { audio(p: Int16Array): void; digit(d: string): void };

/** An inbound call's dialog, confirmed by the ACK, and its RTP session. */
interface InboundMedia {
  dialog: Dialog;
  rtp: RtpSession;
  codec: Codec;
}

/** Live counters: calls in progress and the latency samples of answered turns (benchmark, tests). */
export interface MediaStats {
  calls: number;
  callsTotal: number;
  responseLatencyMs: number[];
}

/** What starting a call needs besides the dialog and the media. */
export interface CallStartParams {
  conversationId: string;
  callSid: string;
  accountId: string;
  projectId: string;
  environment: string;
  variantId: string | null;
  fromNumber: string;
  toNumber: string;
  sipHeaders: Record<string, string>;
  /** The trunk the call came in on or went out through; null when it is not known (handoffs are then REFERs). */
  trunk: DialTrunk | null;
}

/** A number as E.164 candidates: as dialled, and with a leading `+` when it has none. */
const e164Candidates = (user: string) => {
  const u = user.trim().replace(/^tel:/i, '');
  return u.startsWith('+') ? [u] : [`+${u}`, u];
};

/**
 * The number an INVITE dialled: its Request-URI's user part (a `tel:` URI's number), which names where the request
 * goes (RFC 3261 8.2.2.1) and is what a carrier routes by; To is the caller's idea of whom it called and, on a
 * diverted call, still names the number first dialled. A Request-URI without a user part (`sip:gw.example.com`, as
 * a trunk sends that routes by its own configuration) falls back to To's user part.
 */
export function dialledUser(invite: Pick<IncomingInvite, 'request' | 'toUser'>): string {
  const uri: unknown = invite.request.uri;
  if (typeof uri !== 'string') return invite.toUser;
  const tel = /^tel:([^;]*)/i.exec(uri);
  // The package's URI reader takes only a lower-case `sip:`/`sips:` scheme (a scheme is case-insensitive: RFC 3261 19.1.4).
  const user = tel ? userOf({ uri: `sip:${tel[1]}@tel`, params: {} }) : userOf({ uri: uri.replace(/^sips?:/i, (scheme) => scheme.toLowerCase()), params: {} });
  return user || invite.toUser;
}

/**
 * The media gateway (`gateway/media`): the voice counterpart of `gateway/socket`. A SIP user agent and RTP
 * on HOST that turns calls into conversation actor asks; it holds no conversation state. An INVITE to a
 * number bound to an agent (`builder/telephony.ts`) starts a `VOICE-SIP` conversation of that agent in the
 * live environment; outbound calls come in as dial requests (`dial.ts`).
 */
export class MediaGateway {
  readonly ua: SipEndpoint;
  readonly pacer = new Pacer();
  readonly ports: RtpPorts;
  readonly stats: MediaStats = { calls: 0, callsTotal: 0, responseLatencyMs: [] };
  private readonly live = new Set<VoiceCall>();

  constructor(readonly o: MediaGatewayOptions) {
    this.ports = new RtpPorts(o.host, o.rtpPortMin, o.rtpPortMax);
    this.ua = new SipEndpoint({
      host: o.host,
      port: o.sipPort,
      ...(o.tls ? { tlsPort: o.tls.port, tls: { key: o.tls.key, cert: o.tls.cert, verifyPeer: o.tls.verifyPeer } } : {}),
      log: (msg, extra) => o.log('warn', msg, extra),
      ...(o.pendingInvitesPerAddress ? { pendingInvitesPerAddress: o.pendingInvitesPerAddress } : {}),
    });
    this.ua.onInvite = (invite) =>
      void this.inbound(invite).catch((err) => {
        o.log('warn', 'inbound call failed', { err: String(err) });
        // Out of RTP ports is overload, which the caller may retry elsewhere or later (RFC 3261 21.5.4).
        if (err instanceof RtpPortsExhausted) invite.reject(503, 'Service Unavailable');
        else invite.reject(500, 'Server Internal Error');
      });
  }

  /** Starts the user agent; rejects with its bind error (see `SipEndpoint.start`). */
  start(): Promise<void> {
    return this.ua.start();
  }

  /** The address SDP names for our audio. */
  get mediaAddress(): string {
    return this.o.host === '0.0.0.0' || this.o.host === '::' ? '127.0.0.1' : this.o.host;
  }

  /** What the agent runs in an environment: the speech hints and voice of its deployed content. */
  async agentSpeech(projectId: string, environment: string) {
    const running = await runningContent(this.o.builder, projectId, environment);
    if (!running) return null;
    const voice: VoiceSettings = { ...DEFAULT_VOICE, ...(running.content.voice ?? {}) };
    return { hints: hintsOf(projectId, running.content, running.artifactVersion), voice };
  }

  private async inbound(invite: IncomingInvite): Promise<void> {
    let binding: NumberBinding | null = null;
    for (const n of e164Candidates(dialledUser(invite))) {
      binding = await this.o.telephony.numberByE164(n);
      if (binding) break;
    }
    if (!binding) return invite.reject(404, 'Not Found');
    // An INVITE without a body is a delayed offer (RFC 3261 13.2.1): we offer in the 200, the answer comes in the ACK.
    const delayed = invite.sdp.trim() === '';
    const offer = delayed ? null : readSdp(invite.sdp);
    const chosen = delayed ? null : choose(offer);
    if (chosen && 'error' in chosen) return invite.reject(488, 'Not Acceptable Here');
    const speech = await this.agentSpeech(binding.agent_id, 'live');
    if (!speech) return invite.reject(480, 'Temporarily Unavailable');
    if (invite.cancelled) return;
    invite.progress(180, 'Ringing');
    // Our own offer is SRTP when the INVITE came over TLS (its SDES key must not travel in clear), as a bridge's B leg's is.
    const leg = await openLeg(this.ports, offer ? offer.srtp !== null : invite.transport === 'tls');
    if (invite.cancelled) {
      leg.socket.close();
      return;
    }
    const sink = { audio: (_: Int16Array) => {}, digit: (_: string) => {} };
    const sinks = { audio: (p: Int16Array) => sink.audio(p), digit: (d: string) => sink.digit(d) };
    const media = offer && chosen ? await this.answered(invite, leg, offer, chosen, sinks) : await this.offered(invite, leg, sinks);
    if (!media) return;
    const { dialog, rtp, codec } = media;
    const callSid = `IN-${randomUUID()}`;
    const trunk = await this.o.telephony.trunk(binding.connector_id).catch(() => null);
    const call = this.callOf(
      { conversationId: uuidv7(), callSid, accountId: binding.account_id, projectId: binding.agent_id, environment: 'live', variantId: binding.variant_id, fromNumber: invite.fromUser, toNumber: binding.number, sipHeaders: extraHeaders(invite.request), trunk },
      codec, speech, dialog, rtp, () => {},
    );
    sink.audio = (p) => call.audio(p);
    sink.digit = (d) => call.digit(d);
    await call.start();
  }

  /** An INVITE with an offer: our answer in the 200; the call's media once the ACK came (null: it never did). */
  private async answered(invite: IncomingInvite, leg: MediaLeg, offer: MediaDescription, chosen: { codec: Codec; dtmf: number | null }, sink: RtpSink): Promise<InboundMedia | null> {
    const rtp = sessionOf(leg, offer, chosen.codec, chosen.dtmf, this.pacer, sink);
    // Nothing is sent before the ACK: an INVITE's SDP can name anyone's address, and its sender (over UDP, any
    // address it likes) need never see our answer; 32 s of audio to a stranger for one datagram otherwise.
    rtp.hold();
    const dialog = invite.accept(answerOf(leg, this.mediaAddress, offer, chosen.codec, chosen.dtmf));
    followReinvites(dialog, leg, rtp, this.mediaAddress, chosen.codec, chosen.dtmf, this.reinviteLog);
    if (!(await dialog.confirmed())) {
      rtp.close();
      return null;
    }
    rtp.release();
    return { dialog, rtp, codec: chosen.codec };
  }

  /**
   * A delayed offer (an INVITE without SDP): our offer (both G.711 codecs, telephone-event) in the 200, its answer
   * read from the ACK (RFC 3261 13.2.2.4, 13.3.1.4). An ACK whose answer the call cannot take (none, no G.711 of
   * ours, SRTP where we offered none or the other way round) gets a BYE: the dialog is up, and only a BYE ends it.
   * The RTP session is made from the answer, after the ACK: nothing is sent before it.
   */
  private async offered(invite: IncomingInvite, leg: MediaLeg, sink: RtpSink): Promise<InboundMedia | null> {
    // A re-INVITE before the ACK is 491 (`Dialog.handle`): the session follows re-INVITEs once it is made.
    const dialog = invite.accept(offerOf(leg, this.mediaAddress));
    if (!(await dialog.confirmed())) {
      leg.socket.close();
      return null;
    }
    const answer = readSdp(dialog.ackBody);
    const taken = takeAnswer(leg, answer);
    if ('error' in taken) {
      this.o.log('info', 'delayed offer: the ACK has no answer the call can take; hung up', { call_id: dialog.callId, reason: taken.error });
      leg.socket.close();
      void dialog.bye();
      return null;
    }
    const rtp = sessionOf(leg, answer!, taken.codec, taken.dtmf, this.pacer, sink);
    followReinvites(dialog, leg, rtp, this.mediaAddress, taken.codec, taken.dtmf, this.reinviteLog);
    return { dialog, rtp, codec: taken.codec };
  }

  /** Where `followReinvites` tells of an answer to our re-offer that a call could not take. */
  readonly reinviteLog = (msg: string, extra: Record<string, unknown>) => this.o.log('info', msg, extra);

  /** A call over an established dialog and RTP session (inbound or outbound). */
  callOf(
    p: CallStartParams,
    codec: import('./rtp/codec.js').Codec,
    speech: { hints: import('./speech/types.js').SpeechHints; voice: VoiceSettings },
    dialog: import('./dialog.js').Dialog,
    rtp: import('./rtp/session.js').RtpSession,
    onEnded: (how: CallEnd) => void,
  ): VoiceCall {
    const start: ConversationStart = {
      accountId: p.accountId,
      projectId: p.projectId,
      environment: p.environment,
      channel: 'VOICE-SIP',
      variantId: p.variantId,
      integrationAttributes: {},
      // The recogniser's language (pocketsphinx: en-US), so the record and the `language` filter know the call's.
      asrLangCode: this.o.stt.language,
      ttsLangCode: '',
      initialMessage: null,
      fromNumber: p.fromNumber,
      toNumber: p.toNumber,
      sipHeaders: p.sipHeaders,
      callSid: p.callSid,
      at: Date.now(),
      idleTimeoutMs: this.o.conversationIdleMs,
    };
    this.stats.calls++;
    this.stats.callsTotal++;
    const call: VoiceCall = new VoiceCall(
      {
        client: this.o.runtime.client,
        tts: this.o.tts,
        stt: this.o.stt,
        turnTaking: this.o.turnTaking,
        mediaTimeoutMs: this.o.mediaTimeoutMs,
        askTimeoutMs: this.o.askTimeoutMs,
        turnWaitMs: this.o.turnWaitMs,
        log: this.o.log,
        onResponseLatency: (ms) => {
          this.stats.responseLatencyMs.push(ms);
          if (this.stats.responseLatencyMs.length > 100_000) this.stats.responseLatencyMs.splice(0, 50_000);
        },
      },
      {
        conversationId: p.conversationId,
        callSid: p.callSid,
        start,
        codec,
        voice: speech.voice,
        hints: speech.hints,
        dialog,
        rtp,
        bridge:
          p.trunk?.transfer === 'bridge'
            ? (target) => {
                const to = bridgeTargetOf(target, p.trunk!);
                return to ? dialBridgeLeg(this, { to, from: p.fromNumber, codec, ringTimeoutMs: this.o.transferRingTimeoutMs }) : null;
              }
            : null,
        onEnded: (how) => {
          this.o.log('info', 'call ended', {
            call_sid: p.callSid,
            conversation_id: p.conversationId,
            reason: how.reason,
            codec,
            srtp: rtp.secure,
            sip_transport: dialog.transport,
            rtp_received: rtp.stats.received,
            rtp_sent: rtp.stats.sent,
            rtp_rejected: rtp.stats.rejected,
          });
          onEnded(how);
          // The last chunks and the meta's ended_at, then the journal's `recording.completed`: awaited by the
          // call before it closes the conversation (a call the agent ended has its conversation ended already;
          // the recordings projector renders its redacted audio on that fact, not on the conversation's end).
          return recording?.end(how.at);
        },
      },
    );
    const recording = this.o.recordings?.tap(p, codec, rtp) ?? null;
    this.live.add(call);
    // A bridged call is still up after its agent's part ended (`onEnded`): it counts, and is hung up at close, until then.
    void call.over.then(() => {
      this.stats.calls--;
      this.live.delete(call);
    });
    return call;
  }

  /**
   * Hangs up every call (each conversation is closed as its BYE goes out), waits for the BYEs in flight to be
   * answered for at most `CLOSE_BYE_WAIT_MS`, and stops listening. Stopped at once, the stack took its
   * transactions with it: a BYE lost on the way was never sent again, and one to a far end named by a host name
   * could still be waiting for the name to resolve; the far end kept a call up that nobody was on.
   */
  async close(): Promise<void> {
    await Promise.all([...this.live].map((c) => c.hangUp('failed')));
    await this.ua.byesSettled(CLOSE_BYE_WAIT_MS);
    this.ua.stop();
  }
}

/** Settings of the media role: what the platform reads from the environment (platform/config.ts `media`). */
export type MediaSettings = MediaConfig;

/**
 * Starts the media role: resolves port 0 to free ports, loads (or generates) the TLS certificate, and
 * starts the user agent.
 */
export async function startMediaGateway(
  o: Omit<MediaGatewayOptions, 'sipPort' | 'tls' | 'rtpPortMin' | 'rtpPortMax' | 'turnTaking' | 'mediaTimeoutMs' | 'transferRingTimeoutMs' | 'pendingInvitesPerAddress'> & {
    settings: MediaSettings;
    dataDir: string;
    /** How port 0 becomes a port (tests hand out a taken one first). */
    freePort?: (host: string) => Promise<number>;
  },
): Promise<MediaGateway> {
  const { freeSipPort: probe } = await import('./ports.js');
  const freeSipPort = o.freePort ?? probe;
  const { sipTlsCredentials } = await import('./tls.js');
  const s = o.settings;
  let creds: { cert: string | Buffer; key: string | Buffer } | null = null;
  if (s.tlsPort !== null) {
    try {
      const made = await sipTlsCredentials({ dataDir: o.dataDir, certFile: s.tlsCertFile, keyFile: s.tlsKeyFile, host: o.host });
      if (made.generated) o.log('info', 'generated a self-signed SIP TLS certificate', { file: made.generated });
      creds = made;
    } catch (err) {
      // Named files that cannot be read are a configuration error; a certificate that cannot be generated
      // (no openssl) leaves SIP over UDP and TCP working.
      if (s.tlsCertFile || s.tlsKeyFile) throw err;
      o.log('warn', 'SIP over TLS is off: no certificate could be generated (set SIP_TLS_CERT and SIP_TLS_KEY)', { err: String(err) });
    }
  }
  // A taken port is known by the bind itself (`SipEndpoint.start`). A port found free for port 0 can be taken
  // by another process before the stack binds it: then try others; a configured one is named.
  for (let attempt = 1; ; attempt++) {
    const sipPort = s.sipPort || (await freeSipPort(o.host));
    const tls: MediaGatewayOptions['tls'] = creds ? { port: s.tlsPort || (await freeSipPort(o.host)), cert: creds.cert, key: creds.key, verifyPeer: s.tlsVerify } : null;
    const gw = new MediaGateway(Object.assign({}, o, { sipPort, tls, rtpPortMin: s.rtpPortMin, rtpPortMax: s.rtpPortMax, turnTaking: s.turnTaking, mediaTimeoutMs: s.mediaTimeoutMs, transferRingTimeoutMs: s.transferRingTimeoutMs, pendingInvitesPerAddress: s.pendingInvitesPerAddress }));
    try {
      await gw.start();
      return gw;
    } catch (err) {
      gw.ua.stop();
      const e = err as NodeJS.ErrnoException & { port?: number };
      if (e.code !== 'EADDRINUSE') throw err;
      const onTls = tls !== null && e.port === tls.port && e.port !== sipPort;
      if ((onTls ? s.tlsPort === 0 : !s.sipPort) && attempt < 5) continue;
      if (onTls) throw new Error(`SIP_TLS_PORT ${tls.port} is in use on ${o.host}; set SIP_TLS_PORT to a free port, 0 for any, or off`);
      throw new Error(`SIP_PORT ${sipPort} is in use on ${o.host} (UDP or TCP); set SIP_PORT to a free port, or 0 for any`);
    }
  }
}
