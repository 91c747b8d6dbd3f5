import sip from './sip-package.js';
import type { DialTrunk } from '../../actors/call/mod.js';
import type { Dialog, SipEndpoint, SipTarget, SipTransport } from './dialog.js';
import { DEFAULT_DTMF_PT, followReinvites, offerOf, openLeg, readSdp, sessionOf, type MediaLeg } from './media.js';
import type { Codec } from './rtp/codec.js';
import type { Pacer } from './rtp/pacer.js';
import type { RtpPorts } from './rtp/ports.js';
import type { RtpSession } from './rtp/session.js';

/**
 * A handoff by bridging (docs/telephony.md, `transfer: bridge` on the call's telephony connector): instead of
 * a REFER, which hands the call to the far end and leaves the platform blind to what follows, the gateway
 * places a second call (the B leg) to the destination and relays the audio between the two legs. It thus
 * knows when the bridged call ends, and reports it to the conversation through the same bridge-ended path an
 * outside telephony stack posts to (contract 4.9), so a self-hosted stack and an outside one behave alike.
 * Nobody listens in: the relayed packets are not decoded, recorded or transcribed.
 */

/** The trunk a call came in on or went out through: where a `tel:` destination is called. */
export type BridgeTrunk = Omit<DialTrunk, 'transfer'>;

/** Where the B leg's INVITE goes, and whom it names. */
export interface BridgeTarget {
  target: SipTarget;
  /** The Request-URI's and To's user part. */
  to: string;
  credentials?: { user: string; password: string };
}

/**
 * The B leg's destination of a REFER target (`referTarget`): a SIP URI at its own host (port 5060, or 5061 for
 * `sips:`; its `transport` parameter, else UDP, or TLS for `sips:`), a `tel:` number through the call's trunk
 * (with its credentials). Null when the URI cannot be read or names no host.
 */
export function bridgeTargetOf(refer: string, trunk: BridgeTrunk): BridgeTarget | null {
  const tel = /^tel:(\+?[0-9]{3,15})$/.exec(refer);
  if (tel) {
    return {
      target: { host: trunk.host, port: trunk.port, transport: trunk.transport },
      to: tel[1],
      ...(trunk.username && trunk.password ? { credentials: { user: trunk.username, password: trunk.password } } : {}),
    };
  }
  let uri: ReturnType<typeof sip.parseUri>;
  try {
    uri = sip.parseUri(refer);
  } catch {
    return null;
  }
  if (!uri || !uri.host) return null;
  const secure = uri.schema?.toLowerCase() === 'sips';
  const param = String(uri.params?.transport ?? '').toLowerCase();
  const transport: SipTransport = secure || param === 'tls' ? 'tls' : param === 'tcp' ? 'tcp' : 'udp';
  let user = uri.user ?? '';
  try {
    user = decodeURIComponent(user);
  } catch {
    // A `%` that starts no escape: the user part as written.
  }
  return { target: { host: uri.host.replace(/^\[|\]$/g, ''), port: Number(uri.port) || (transport === 'tls' ? 5061 : 5060), transport }, to: user };
}

/** What the B leg needs of the media gateway. */
export interface BridgeDialer {
  ua: SipEndpoint;
  ports: RtpPorts;
  pacer: Pacer;
  mediaAddress: string;
  /** Where an answer to our re-offer that the leg could not take is told (`followReinvites`). */
  reinviteLog?: (msg: string, extra: Record<string, unknown>) => void;
}

/** An answered B leg: its dialog and its RTP stream. */
export interface BridgeLeg {
  dialog: Dialog;
  rtp: RtpSession;
  /**
   * The payload type this leg's far end sends its digits under, when not the one its SDP named for receiving
   * them (`rtp.dtmfPayloadType`): a far end sends under the type of the SDP it sends to, so a leg we called
   * sends under our offer's (RFC 3264 lets its answer name another).
   */
  digitsFrom?: number;
}

/** A B leg being called: what became of it, and a way to give up on it (CANCEL, or BYE once answered). */
export interface BridgeAttempt {
  outcome: Promise<({ ok: true } & BridgeLeg) | { ok: false; reason: string }>;
  cancel(): void;
}

/**
 * Calls the B leg: an INVITE offering only the A leg's codec (the relay does not transcode) with
 * telephone-event, SRTP when its signalling goes over TLS (the SDES key must not travel in clear), CANCELled
 * when nobody answers within `ringTimeoutMs` or when `cancel` is called. An answer with another codec is hung up,
 * and the outcome told as our BYE goes out, not once it is answered.
 */
export function dialBridgeLeg(d: BridgeDialer, o: { to: BridgeTarget; from: string; codec: Codec; ringTimeoutMs: number }): BridgeAttempt {
  let cancelled = false;
  let cancelInvite = () => {};
  const outcome = (async (): Promise<({ ok: true } & BridgeLeg) | { ok: false; reason: string }> => {
    const leg: MediaLeg = await openLeg(d.ports, o.to.target.transport === 'tls');
    if (cancelled) {
      leg.socket.close();
      return { ok: false, reason: 'cancelled' };
    }
    const invite = d.ua.invite({
      target: o.to.target,
      to: o.to.to,
      from: o.from,
      sdp: offerOf(leg, d.mediaAddress, [o.codec]),
      ...(o.to.credentials ? { credentials: o.to.credentials } : {}),
    });
    cancelInvite = () => invite.cancel();
    const ring = setTimeout(() => invite.cancel(), o.ringTimeoutMs);
    ring.unref?.();
    const answered = await invite.outcome;
    clearTimeout(ring);
    if (!answered.ok) {
      leg.socket.close();
      return { ok: false, reason: `${answered.status} ${answered.reason}`.trim() };
    }
    const answer = readSdp(answered.sdp);
    if (cancelled || !answer || answer.codecs[0] !== o.codec || (leg.localKey && !answer.srtp)) {
      // Hung up without waiting for the BYE's answer: a destination that answered and then went silent never
      // gives one (its transaction gives up after 64·T1, 32 s), and the caller's hang-up and the handoff's
      // failure waited that long. The BYE goes on on its own (`SipEndpoint.byesSettled`); `bye` never rejects.
      void answered.dialog.bye();
      leg.socket.close();
      return { ok: false, reason: cancelled ? 'cancelled' : 'answered with unusable media' };
    }
    const rtp = sessionOf(leg, answer, o.codec, answer.dtmfPayloadType, d.pacer, { audio: () => {}, digit: () => {} });
    // The destination may move its media or put the call on hold (a re-INVITE, with an offer or without one):
    // taken while it keeps the codec.
    followReinvites(answered.dialog, leg, rtp, d.mediaAddress, o.codec, answer.dtmfPayloadType, d.reinviteLog);
    return { ok: true, dialog: answered.dialog, rtp, digitsFrom: DEFAULT_DTMF_PT };
  })();
  return {
    outcome,
    cancel() {
      cancelled = true;
      cancelInvite();
    },
  };
}

/** How an answered bridge ended: when, and which side hung up first (or that nothing came from one side for the media timeout). */
export interface BridgeEnd {
  at: number;
  by: 'caller' | 'destination' | 'media_timeout' | 'shutdown';
}

/**
 * Two answered legs relayed to each other until either hangs up (its BYE; the other side then gets ours) or
 * sends no media for `mediaTimeoutMs` (both get a BYE). `ended` resolves as soon as the bridge ends, whatever
 * becomes of our BYEs.
 */
export class Bridge {
  readonly ended: Promise<BridgeEnd>;
  private done: ((end: BridgeEnd) => void) | null = null;
  private readonly watch: ReturnType<typeof setInterval>;

  constructor(private readonly a: BridgeLeg, private readonly b: BridgeLeg, mediaTimeoutMs: number) {
    this.ended = new Promise((resolve) => (this.done = resolve));
    const aDigits = a.digitsFrom ?? a.rtp.dtmfPayloadType;
    const bDigits = b.digitsFrom ?? b.rtp.dtmfPayloadType;
    a.rtp.relay((p) => b.rtp.forward(p, aDigits));
    b.rtp.relay((p) => a.rtp.forward(p, bDigits));
    a.dialog.onBye = () => this.end('caller');
    b.dialog.onBye = () => this.end('destination');
    this.watch = setInterval(() => {
      if (a.rtp.silentForMs() >= mediaTimeoutMs || b.rtp.silentForMs() >= mediaTimeoutMs) this.end('media_timeout');
    }, Math.min(5000, Math.max(250, mediaTimeoutMs / 4)));
    this.watch.unref?.();
  }

  /**
   * Hangs up what is still up; idempotent (the first reason stands). The bridge is over at once (`ended`): the
   * conversation learns of it now, not when the other side answers our BYE, which a far end that is gone never
   * does (its transaction gives up after 64·T1, 32 s, and the bridge-ended report came that late). The BYEs go on
   * on their own; only the gateway's shutdown waits for their answers (`MediaGateway.close`, bounded).
   */
  end(by: BridgeEnd['by']): void {
    const done = this.done;
    if (!done) return;
    this.done = null;
    clearInterval(this.watch);
    // The side that hung up has ended its dialog already: its `bye` sends nothing (and `bye` never rejects).
    void this.a.dialog.bye();
    void this.b.dialog.bye();
    this.a.rtp.close();
    this.b.rtp.close();
    done({ at: Date.now(), by });
  }
}
