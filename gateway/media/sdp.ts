import sdpTransform from 'sdp-transform';
import { PAYLOAD_TYPE, type Codec } from './rtp/codec.js';
import { inlineOf, keyOfInline, SRTP_SUITE, type SrtpKey } from './rtp/srtp.js';

/** What one side's SDP says about its audio stream. */
export interface MediaDescription {
  address: string;
  port: number;
  /** Codecs in the order of preference the SDP lists them. */
  codecs: Codec[];
  dtmfPayloadType: number | null;
  /** `RTP/SAVP`: the stream is SRTP, with this key (the first crypto line of our suite). */
  srtp: SrtpKey | null;
  /** The SDP asked for SRTP but offered no usable key of our suite. */
  srtpUnusable: boolean;
}

/**
 * Reads the first audio stream of an SDP body; null when there is none, or when it is declined (port 0) or names
 * a port no UDP socket has. A payload type outside RTP's 0 to 127 means nothing.
 */
export function readSdp(body: string): MediaDescription | null {
  let s: sdpTransform.SessionDescription;
  try {
    s = sdpTransform.parse(body);
  } catch {
    return null;
  }
  const m = s.media?.find((x) => x.type === 'audio');
  if (!m || !Number.isInteger(m.port) || m.port < 1 || m.port > 65535) return null;
  const address = m.connection?.ip ?? s.connection?.ip ?? '';
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
  const crypto = (m.crypto ?? []).find((c) => c.suite === SRTP_SUITE);
  const key = crypto ? keyOfInline(crypto.config) : null;
  return { address, port: m.port, codecs, dtmfPayloadType: dtmf, srtp: secure ? key : null, srtpUnusable: secure && !key };
}

export interface LocalMedia {
  address: string;
  port: number;
  codecs: Codec[];
  dtmfPayloadType: number;
  srtp: SrtpKey | null;
  /** o= session version; bumped for every new offer or answer in a dialog. */
  version: number;
  sessionId: number;
}

/** Our SDP (an offer, or the answer once `codecs` holds only the chosen codec). */
export function writeSdp(l: LocalMedia): string {
  const ip = l.address.includes(':') ? 'IP6' : 'IP4';
  const pts = [...l.codecs.map((c) => PAYLOAD_TYPE[c]), l.dtmfPayloadType];
  const lines = [
    'v=0',
    `o=switchboard ${l.sessionId} ${l.version} IN ${ip} ${l.address}`,
    's=switchboard',
    `c=IN ${ip} ${l.address}`,
    't=0 0',
    `m=audio ${l.port} ${l.srtp ? 'RTP/SAVP' : 'RTP/AVP'} ${pts.join(' ')}`,
    ...l.codecs.map((c) => `a=rtpmap:${PAYLOAD_TYPE[c]} ${c}/8000`),
    `a=rtpmap:${l.dtmfPayloadType} telephone-event/8000`,
    `a=fmtp:${l.dtmfPayloadType} 0-15`,
    'a=ptime:20',
    ...(l.srtp ? [`a=crypto:1 ${SRTP_SUITE} inline:${inlineOf(l.srtp)}`] : []),
    'a=sendrecv',
  ];
  return `${lines.join('\r\n')}\r\n`;
}
