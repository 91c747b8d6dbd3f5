import { newSrtpKey, type SrtpKey } from './rtp/srtp.js';
import type { Codec } from './rtp/codec.js';
import type { RtpPorts } from './rtp/ports.js';
import type { Pacer } from './rtp/pacer.js';
import { RtpSession } from './rtp/session.js';
import { answerDirection, readSdp, writeSdp, type MediaDescription } from './sdp.js';
import type dgram from 'node:dgram';

/** Our side of a call's audio before the far end's SDP is known (an offer) or after (an answer). */
export interface MediaLeg {
  socket: dgram.Socket;
  localKey: SrtpKey | null;
  sessionId: number;
}

export const DEFAULT_DTMF_PT = 101;

/** Binds a port and, for SRTP, makes our key. */
export async function openLeg(ports: RtpPorts, srtp: boolean): Promise<MediaLeg> {
  return { socket: await ports.bind(), localKey: srtp ? newSrtpKey() : null, sessionId: Math.floor(Math.random() * 1e9) };
}

/** Our offer: `codecs` (both G.711 codecs, µ-law first, unless given) and telephone-event. */
export function offerOf(leg: MediaLeg, address: string, codecs: Codec[] = ['PCMU', 'PCMA']): string {
  return writeSdp({ address, port: leg.socket.address().port, codecs, dtmfPayloadType: DEFAULT_DTMF_PT, srtp: leg.localKey, version: 1, sessionId: leg.sessionId });
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
 * hold, is answered `recvonly`), its other m-lines rejected (port 0) in their places.
 */
export function answerOf(leg: MediaLeg, address: string, offer: MediaDescription, codec: Codec, dtmf: number | null, version = 1): string {
  return writeSdp({
    address,
    port: leg.socket.address().port,
    codecs: [codec],
    dtmfPayloadType: dtmf ?? DEFAULT_DTMF_PT,
    srtp: leg.localKey,
    ...(offer.cryptoTag !== null ? { cryptoTag: offer.cryptoTag } : {}),
    direction: answerDirection(offer.direction),
    version,
    sessionId: leg.sessionId,
    answering: { streams: offer.streams, index: offer.index },
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
 * and port, its direction: a hold or its end) and our answer is returned; null when the offer has no audio stream
 * with that codec (the re-INVITE is then 488 and nothing changes).
 */
export function reanswerOf(leg: MediaLeg, rtp: RtpSession, address: string, sdp: string, codec: Codec, dtmf: number | null): string | null {
  const again = readSdp(sdp);
  if (!again || !again.codecs.includes(codec)) return null;
  if (again.address && again.port) rtp.setPeer({ address: again.address, port: again.port });
  rtp.setDirection(again.direction);
  return answerOf(leg, address, again, codec, dtmf, 2);
}

export { readSdp };
