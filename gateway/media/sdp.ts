import sdpTransform from 'sdp-transform';
import { PAYLOAD_TYPE, type Codec } from './rtp/codec.js';
import { inlineOf, keyOfInline, SRTP_SUITE, type SrtpKey } from './rtp/srtp.js';

/** One m-line of an SDP as an answer must echo it when it rejects the stream (RFC 3264 6). */
export interface OfferedStream {
  type: string;
  port: number;
  protocol: string;
  /** The format list as written (payload types, or a name such as `t38`). */
  formats: string;
}

/** The m-lines of an SDP and which of them is the call's audio stream. */
export interface MLines {
  streams: OfferedStream[];
  index: number;
}

/** A stream's direction, as the side whose SDP it is sees it (RFC 3264 5.1). */
export type Direction = 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';
const DIRECTIONS = new Set<string>(['sendrecv', 'sendonly', 'recvonly', 'inactive']);

/** The direction an answer gives a stream offered with `offered` (RFC 3264 6.1): the mirror image. */
export function answerDirection(offered: Direction): Direction {
  return offered === 'sendonly' ? 'recvonly' : offered === 'recvonly' ? 'sendonly' : offered;
}

/** What one side's SDP says about its audio stream. */
export interface MediaDescription {
  address: string;
  port: number;
  /** Codecs in the order of preference the SDP lists them. */
  codecs: Codec[];
  dtmfPayloadType: number | null;
  /** `RTP/SAVP`: the stream is SRTP, with this key (the first crypto line of our suite with a usable key). */
  srtp: SrtpKey | null;
  /** The tag of that crypto line, which an answer that takes it carries (RFC 4568 5.1.2); null when `srtp` is. */
  cryptoTag: number | null;
  /**
   * Whether that side sends and takes audio on the stream (its m-line's attribute, else the session's, else
   * sendrecv): a far end that holds the call offers `sendonly` or `inactive`.
   */
  direction: Direction;
  /** The SDP asked for SRTP but offered no usable key of our suite. */
  srtpUnusable: boolean;
  /** Every m-line of the SDP, in order (an answer has one for each), and which of them this stream is. */
  streams: OfferedStream[];
  index: number;
}

/**
 * Reads the audio stream of an SDP body the call takes: the first audio m-line with a G.711 codec (and, for SRTP, a
 * key of our suite), else the first audio m-line (`choose` then says why it cannot be taken); null when there is no
 * audio stream, or when each is declined (port 0) or names a port no UDP socket has. A payload type outside RTP's 0
 * to 127 means nothing. The other m-lines (video, a second audio stream) are kept for the answer to reject.
 */
export function readSdp(body: string): MediaDescription | null {
  let s: sdpTransform.SessionDescription;
  try {
    s = sdpTransform.parse(body);
  } catch {
    return null;
  }
  const media = s.media ?? [];
  const streams = media.map((m) => ({ type: String(m.type), port: Number(m.port), protocol: String(m.protocol ?? ''), formats: String(m.payloads ?? '').trim() }));
  const audio: MediaDescription[] = [];
  media.forEach((m, index) => {
    if (m.type !== 'audio' || !Number.isInteger(m.port) || m.port < 1 || m.port > 65535) return;
    audio.push(audioOf(m, s.connection?.ip ?? '', DIRECTIONS.has(String(s.direction)) ? (s.direction as Direction) : 'sendrecv', streams, index));
  });
  return audio.find((a) => a.codecs.length > 0 && !a.srtpUnusable) ?? audio[0] ?? null;
}

function audioOf(m: sdpTransform.SessionDescription['media'][number], sessionAddress: string, sessionDirection: Direction, streams: OfferedStream[], index: number): MediaDescription {
  const address = m.connection?.ip ?? sessionAddress;
  const pts = String(m.payloads ?? '')
    .split(/\s+/)
    .filter(Boolean)
    .map(Number)
    .filter((pt) => Number.isInteger(pt) && pt >= 0 && pt <= 127);
  const names = new Map<number, string>();
  for (const r of m.rtp ?? []) names.set(r.payload, r.codec.toUpperCase());
  const codecs: Codec[] = [];
  let dtmf: number | null = null;
  for (const pt of pts) {
    const name = names.get(pt) ?? (pt === 0 ? 'PCMU' : pt === 8 ? 'PCMA' : '');
    if ((name === 'PCMU' && pt === 0) || (name === 'PCMA' && pt === 8)) codecs.push(name);
    else if (name === 'TELEPHONE-EVENT' && dtmf === null) dtmf = pt;
  }
  const secure = /SAVP/.test(m.protocol ?? '');
  const offered = (m.crypto ?? []).filter((c) => c.suite === SRTP_SUITE).map((c) => ({ tag: Number(c.id), key: keyOfInline(c.config) }));
  const crypto = offered.find((c) => c.key !== null && Number.isInteger(c.tag) && c.tag >= 0);
  const key = crypto?.key ?? null;
  const direction = DIRECTIONS.has(String(m.direction)) ? (m.direction as Direction) : sessionDirection;
  return { address, port: m.port, codecs, dtmfPayloadType: dtmf, srtp: secure ? key : null, cryptoTag: secure && crypto ? crypto.tag : null, direction, srtpUnusable: secure && !key, streams, index };
}

export interface LocalMedia {
  address: string;
  port: number;
  codecs: Codec[];
  dtmfPayloadType: number;
  srtp: SrtpKey | null;
  /** The tag of our crypto line: an answer's is the tag of the offered line it took (RFC 4568 5.1.2); 1 in an offer. */
  cryptoTag?: number;
  /** Our direction (default sendrecv): an answer's mirrors its offer's (`answerDirection`). */
  direction?: Direction;
  /** o= session version; bumped for every new offer or answer in a dialog. */
  version: number;
  sessionId: number;
  /**
   * An answer: the offer's m-lines and which one is ours. The others are rejected with port 0, each in its place
   * with its own format list (RFC 3264 6: an answer has as many m-lines as its offer, in the same order). A new
   * offer within a call: the m-lines of the exchange before it, kept in their places (RFC 3264 8: none is removed).
   */
  mLines?: MLines;
}

/** Our SDP (an offer, or the answer once `codecs` holds only the chosen codec). */
export function writeSdp(l: LocalMedia): string {
  const ip = l.address.includes(':') ? 'IP6' : 'IP4';
  const pts = [...l.codecs.map((c) => PAYLOAD_TYPE[c]), l.dtmfPayloadType];
  const audio = [
    `m=audio ${l.port} ${l.srtp ? 'RTP/SAVP' : 'RTP/AVP'} ${pts.join(' ')}`,
    ...l.codecs.map((c) => `a=rtpmap:${PAYLOAD_TYPE[c]} ${c}/8000`),
    `a=rtpmap:${l.dtmfPayloadType} telephone-event/8000`,
    `a=fmtp:${l.dtmfPayloadType} 0-15`,
    'a=ptime:20',
    ...(l.srtp ? [`a=crypto:${l.cryptoTag ?? 1} ${SRTP_SUITE} inline:${inlineOf(l.srtp)}`] : []),
    `a=${l.direction ?? 'sendrecv'}`,
  ];
  const streams = l.mLines
    ? l.mLines.streams.flatMap((m, i) => (i === l.mLines!.index ? audio : [`m=${m.type} 0 ${m.protocol} ${m.formats || '0'}`]))
    : audio;
  const lines = ['v=0', `o=switchboard ${l.sessionId} ${l.version} IN ${ip} ${l.address}`, 's=switchboard', `c=IN ${ip} ${l.address}`, 't=0 0', ...streams];
  return `${lines.join('\r\n')}\r\n`;
}
