/** An RTP packet (RFC 3550) as the media gateway reads and writes it: no CSRCs, no header extensions sent. */
export interface RtpPacket {
  payloadType: number;
  marker: boolean;
  sequence: number;
  timestamp: number;
  ssrc: number;
  payload: Buffer;
}

/** The fixed 12-byte header plus the payload. */
export function writeRtp(p: RtpPacket): Buffer {
  const b = Buffer.allocUnsafe(12 + p.payload.length);
  b[0] = 0x80;
  b[1] = (p.marker ? 0x80 : 0) | (p.payloadType & 0x7f);
  b.writeUInt16BE(p.sequence & 0xffff, 2);
  b.writeUInt32BE(p.timestamp >>> 0, 4);
  b.writeUInt32BE(p.ssrc >>> 0, 8);
  p.payload.copy(b, 12);
  return b;
}

/** The length of a packet's header (CSRCs and extension included), or -1 when it is not RTP version 2. */
export function rtpHeaderLength(b: Buffer): number {
  if (b.length < 12 || b[0] >> 6 !== 2) return -1;
  let n = 12 + (b[0] & 0x0f) * 4;
  if (b[0] & 0x10) {
    if (b.length < n + 4) return -1;
    n += 4 + b.readUInt16BE(n + 2) * 4;
  }
  return n <= b.length ? n : -1;
}

/** Parses a packet; null for anything that is not RTP (RTCP on the same port included). */
export function readRtp(b: Buffer): RtpPacket | null {
  const h = rtpHeaderLength(b);
  if (h < 0) return null;
  const pt = b[1] & 0x7f;
  // RTCP packet types 200-204 land in 72-76 once the marker bit is masked off.
  if (pt >= 72 && pt <= 76) return null;
  let end = b.length;
  if (b[0] & 0x20) end -= b[b.length - 1];
  if (end < h) return null;
  return { payloadType: pt, marker: (b[1] & 0x80) !== 0, sequence: b.readUInt16BE(2), timestamp: b.readUInt32BE(4), ssrc: b.readUInt32BE(8), payload: b.subarray(h, end) };
}
