import { newSrtpKey, type SrtpKey } from './rtp/srtp.js';
import type { Codec } from './rtp/codec.js';
import type { RtpPorts } from './rtp/ports.js';
import type { Pacer } from './rtp/pacer.js';
import { RtpSession } from './rtp/session.js';
import { answerDirection, readSdp, writeSdp, type LocalMedia, type MediaDescription, type MLines } from './sdp.js';
import type { Dialog } from './dialog.js';
import type dgram from 'node:dgram';

/** Our side of a call's audio before the far end's SDP is known (an offer) or after (an answer). */
export interface MediaLeg {
  socket: dgram.Socket;
  localKey: SrtpKey | null;
  sessionId: number;
  /** The o= version of the last SDP we sent on this leg: each new one within the call is one higher (RFC 3264 8). */
  version: number;
  /** The m-lines of the last offer we answered, ours among them (a new offer of ours keeps them); null: ours alone. */
  mLines: MLines | null;
  /** The telephone-event payload type our last SDP named: the one the far end sends its digits under. */
  dtmfNamed: number;
}

export const DEFAULT_DTMF_PT = 101;

/** Binds a port and, for SRTP, makes our key. */
export async function openLeg(ports: RtpPorts, srtp: boolean): Promise<MediaLeg> {
  return { socket: await ports.bind(), localKey: srtp ? newSrtpKey() : null, sessionId: Math.floor(Math.random() * 1e9), version: 1, mLines: null, dtmfNamed: DEFAULT_DTMF_PT };
}

/** Our offer: `codecs` (both G.711 codecs, µ-law first, unless given) and telephone-event. */
export function offerOf(leg: MediaLeg, address: string, codecs: Codec[] = ['PCMU', 'PCMA']): string {
  return writeSdp({ address, port: leg.socket.address().port, codecs, dtmfPayloadType: DEFAULT_DTMF_PT, srtp: leg.localKey, version: leg.version, sessionId: leg.sessionId });
}

/** What we do with an offer: the codec we take (the first of theirs we have), or why we cannot. */
export function choose(offer: MediaDescription | null): { codec: Codec; dtmf: number | null } | { error: string } {
  if (!offer) return { error: 'no audio stream in the SDP' };
  if (offer.srtpUnusable) return { error: 'SRTP without a key of a supported suite' };
  const codec = offer.codecs[0];
  if (!codec) return { error: 'no G.711 codec offered' };
  return { codec, dtmf: offer.dtmfPayloadType };
}

/**
 * What we do with the answer to our offer (a delayed offer's, in the ACK: RFC 3261 13.2.2.4): the codec it took
 * (one we offered: the first G.711 it lists), or why the call cannot go on with it. An answer must take SRTP
 * when our offer was SRTP, with a key of our suite, and not when it was not.
 */
export function takeAnswer(leg: MediaLeg, answer: MediaDescription | null): { codec: Codec; dtmf: number | null } | { error: string } {
  if (!answer) return { error: 'no audio stream in the answer' };
  if (answer.srtpUnusable || (leg.localKey !== null) !== (answer.srtp !== null)) return { error: leg.localKey ? 'SRTP offered, no usable key in the answer' : 'RTP offered, SRTP answered' };
  const codec = answer.codecs[0];
  if (!codec) return { error: 'no G.711 codec in the answer' };
  return { codec, dtmf: answer.dtmfPayloadType };
}

/**
 * Our answer to `offer`: its audio stream taken with `codec` in the mirrored direction (a `sendonly` offer, a
 * hold, is answered `recvonly`), its other m-lines rejected (port 0) in their places, which the leg keeps for an
 * offer of ours (`reofferOf`); in the leg's current o= version.
 */
export function answerOf(leg: MediaLeg, address: string, offer: MediaDescription, codec: Codec, dtmf: number | null): string {
  leg.mLines = { streams: offer.streams, index: offer.index };
  leg.dtmfNamed = dtmf ?? DEFAULT_DTMF_PT;
  return legSdp(leg, address, codec, { direction: answerDirection(offer.direction), ...(offer.cryptoTag !== null ? { cryptoTag: offer.cryptoTag } : {}) });
}

/**
 * An SDP of ours for `leg` as it runs: its port, `codec` with telephone-event under the payload type we named,
 * its SRTP key, its o= line in the current version, the m-lines of its last exchange; `o`: what an answer adds.
 */
function legSdp(leg: MediaLeg, address: string, codec: Codec, o: Pick<LocalMedia, 'cryptoTag' | 'direction'> = {}): string {
  return writeSdp({
    address,
    port: leg.socket.address().port,
    codecs: [codec],
    dtmfPayloadType: leg.dtmfNamed,
    srtp: leg.localKey,
    ...o,
    version: leg.version,
    sessionId: leg.sessionId,
    ...(leg.mLines ? { mLines: leg.mLines } : {}),
  });
}

/** The RTP session of a leg once both SDPs are known. */
export function sessionOf(leg: MediaLeg, remote: MediaDescription, codec: Codec, dtmf: number | null, pacer: Pacer, sink: { audio(p: Int16Array): void; digit(d: string): void }): RtpSession {
  const rtp = new RtpSession({
    socket: leg.socket,
    codec,
    dtmfPayloadType: dtmf,
    srtp: leg.localKey && remote.srtp ? { local: leg.localKey, remote: remote.srtp } : null,
    pacer,
    onAudio: (pcm) => sink.audio(pcm),
    onDigit: (d) => sink.digit(d),
  });
  if (remote.address && remote.address !== '0.0.0.0' && remote.port > 0) rtp.setPeer({ address: remote.address, port: remote.port });
  rtp.setDirection(remote.direction);
  return rtp;
}

/**
 * A re-INVITE's offer `sdp` on a running call leg with `codec`: the session follows it (the far end's new address
 * and port, its direction: a hold or its end, its SRTP key: a new one is read with from now on) and our answer is
 * returned; null when the offer has no audio stream with that codec (the re-INVITE is then 488 and nothing
 * changes). A connection address of 0.0.0.0 is RFC 2543's hold (RFC 3264 8.4: still sent by older phones and
 * PBXs): taken as `sendonly`, and the audio keeps its address, since a datagram to 0.0.0.0 goes to this host.
 */
export function reanswerOf(leg: MediaLeg, rtp: RtpSession, address: string, sdp: string, codec: Codec, dtmf: number | null): string | null {
  const again = readSdp(sdp);
  if (!again || !again.codecs.includes(codec)) return null;
  if (again.address === '0.0.0.0') {
    if (again.direction === 'sendrecv') again.direction = 'sendonly';
    else if (again.direction === 'recvonly') again.direction = 'inactive';
  } else if (again.address && again.port) rtp.setPeer({ address: again.address, port: again.port });
  if (again.srtp) rtp.setRemoteKey(again.srtp);
  rtp.setDirection(again.direction);
  leg.version++;
  return answerOf(leg, address, again, codec, dtmf);
}

/**
 * Our offer in the 200 to a re-INVITE without one (RFC 3261 14.2, RFC 3264 8): the session as it runs, in the next
 * o= version: the call's codec only (its speech is encoded in it, and the call cannot change it) with
 * telephone-event under the payload type we named before, our address and port, our SRTP key when the call is
 * SRTP, the m-lines of the last exchange in their places (the ones not taken at port 0), and `sendrecv` (a hold is
 * the far end's to keep, in its answer).
 */
export function reofferOf(leg: MediaLeg, address: string, codec: Codec): string {
  leg.version++;
  return legSdp(leg, address, codec);
}

/**
 * The answer an ACK brought to our `reofferOf`, taken into the running session: the far end's address and port,
 * its direction (`sendonly` or `inactive`: a hold), its SRTP key (a new one is read with from now on). Null when it
 * was taken; else why it cannot be (no answer, not the call's codec, SRTP where the call has none or the other way
 * round), and the session stays as it was, as after a re-INVITE that fails (RFC 3261 14.1): the offer was that
 * session, and a far end that did not want it was to answer it all the same and hang up (RFC 3261 14.2).
 */
export function takeReanswer(leg: MediaLeg, rtp: RtpSession, body: string, codec: Codec): string | null {
  const answer = readSdp(body);
  const taken = takeAnswer(leg, answer);
  if ('error' in taken) return taken.error;
  const { codecs, srtp, address, port, direction } = answer!;
  if (!codecs.includes(codec)) return `no ${codec} in the answer: the call's codec`;
  if (srtp) rtp.setRemoteKey(srtp);
  if (address && address !== '0.0.0.0' && port > 0) rtp.setPeer({ address, port });
  rtp.setDirection(direction);
  return null;
}

/**
 * Makes a call leg's dialog follow the far end's re-INVITEs: an offer is answered (`reanswerOf`; 488 when the call
 * cannot take it), and one without an offer gets ours (`reofferOf`), the session taking the answer its ACK brings
 * (`takeReanswer`; one it cannot take is logged and changes nothing).
 */
export function followReinvites(
  dialog: Pick<Dialog, 'onReinvite' | 'onReoffer' | 'callId'>,
  leg: MediaLeg,
  rtp: RtpSession,
  address: string,
  codec: Codec,
  dtmf: number | null,
  log: (msg: string, extra: Record<string, unknown>) => void = () => {},
): void {
  dialog.onReinvite = (sdp) => reanswerOf(leg, rtp, address, sdp, codec, dtmf);
  dialog.onReoffer = () => ({
    sdp: reofferOf(leg, address, codec),
    answered: (body) => {
      const error = takeReanswer(leg, rtp, body, codec);
      if (error) log('re-INVITE without an offer: the ACK has no answer the call can take; the call keeps its media', { call_id: dialog.callId, reason: error });
    },
  });
}

export { readSdp };
