import { createCipheriv, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { rtpHeaderLength } from './packet.js';

/** The one SRTP suite the gateway offers and accepts (RFC 4568 name). */
export const SRTP_SUITE = 'AES_CM_128_HMAC_SHA1_80';
const TAG = 10;

/** A master key and salt (16 + 14 bytes), as an SDES `inline:` value carries them in base64. */
export interface SrtpKey {
  key: Buffer;
  salt: Buffer;
}

export const newSrtpKey = (): SrtpKey => ({ key: randomBytes(16), salt: randomBytes(14) });
export const inlineOf = (k: SrtpKey) => Buffer.concat([k.key, k.salt]).toString('base64');
/** The key of an `a=crypto` line's `inline:` parameter (lifetime and MKI parts ignored), or null. */
export function keyOfInline(config: string): SrtpKey | null {
  const m = /^inline:([A-Za-z0-9+/=]+)/.exec(config.trim());
  if (!m) return null;
  const raw = Buffer.from(m[1], 'base64');
  return raw.length === 30 ? { key: raw.subarray(0, 16), salt: raw.subarray(16) } : null;
}

/** The AES-CM key derivation of RFC 3711 4.3 (key derivation rate 0). */
function derive(master: SrtpKey, label: number, length: number): Buffer {
  const iv = Buffer.alloc(16);
  master.salt.copy(iv, 0);
  iv[7] ^= label;
  const c = createCipheriv('aes-128-ctr', master.key, iv);
  return c.update(Buffer.alloc(length));
}

/** The session keys of a master key (RFC 3711 4.3): cipher key, authentication key, cipher salt. */
export function srtpSessionKeys(master: SrtpKey): { encKey: Buffer; authKey: Buffer; salt: Buffer } {
  return { encKey: derive(master, 0, 16), authKey: derive(master, 1, 20), salt: derive(master, 2, 14) };
}

/**
 * One direction of an SRTP stream (RFC 3711) with AES_CM_128_HMAC_SHA1_80: RTP packets in, SRTP packets
 * out (`protect`), or the reverse (`unprotect`, null for a packet that fails authentication or replays
 * nothing new). The rollover counter (and, receiving, the replay window) is kept per SSRC.
 */
export class SrtpContext {
  private readonly encKey: Buffer;
  private readonly authKey: Buffer;
  private readonly salt: Buffer;
  /**
   * Per SSRC (RFC 3711 3.2.3: the rollover counter and the replay list belong to a stream, and a far end may
   * send more than one under a key: a transfer, a media server that takes over, digits on a stream of their own).
   */
  private readonly streams = new Map<number, SrtpStream>();

  private stream(ssrc: number): SrtpStream {
    return this.streams.get(ssrc) ?? this.keep(ssrc, newStream());
  }

  /** A few streams at once is what a call has: past that the oldest is forgotten. */
  private keep(ssrc: number, s: SrtpStream): SrtpStream {
    if (this.streams.size >= MAX_STREAMS) this.streams.delete(this.streams.keys().next().value!);
    this.streams.set(ssrc, s);
    return s;
  }

  constructor(master: SrtpKey) {
    ({ encKey: this.encKey, authKey: this.authKey, salt: this.salt } = srtpSessionKeys(master));
  }

  private iv(ssrc: number, index: number): Buffer {
    const iv = Buffer.alloc(16);
    this.salt.copy(iv, 0);
    iv[4] ^= (ssrc >>> 24) & 0xff;
    iv[5] ^= (ssrc >>> 16) & 0xff;
    iv[6] ^= (ssrc >>> 8) & 0xff;
    iv[7] ^= ssrc & 0xff;
    // The 48-bit packet index sits in bytes 8..13.
    const hi = Math.floor(index / 0x100000000);
    const lo = index >>> 0;
    iv[8] ^= (hi >>> 8) & 0xff;
    iv[9] ^= hi & 0xff;
    iv[10] ^= (lo >>> 24) & 0xff;
    iv[11] ^= (lo >>> 16) & 0xff;
    iv[12] ^= (lo >>> 8) & 0xff;
    iv[13] ^= lo & 0xff;
    return iv;
  }

  private tag(authenticated: Buffer, roc: number): Buffer {
    const r = Buffer.alloc(4);
    r.writeUInt32BE(roc >>> 0);
    return createHmac('sha1', this.authKey).update(authenticated).update(r).digest().subarray(0, TAG);
  }

  protect(rtp: Buffer): Buffer {
    const h = rtpHeaderLength(rtp);
    const seq = rtp.readUInt16BE(2);
    const ssrc = rtp.readUInt32BE(8);
    const s = this.stream(ssrc);
    if (s.lastSeq >= 0 && seq < s.lastSeq && s.lastSeq - seq > 0x8000) s.roc++;
    s.lastSeq = seq;
    const index = s.roc * 0x10000 + seq;
    const c = createCipheriv('aes-128-ctr', this.encKey, this.iv(ssrc, index));
    const body = Buffer.concat([rtp.subarray(0, h), c.update(rtp.subarray(h))]);
    return Buffer.concat([body, this.tag(body, s.roc)]);
  }

  unprotect(srtp: Buffer): Buffer | null {
    const h = rtpHeaderLength(srtp);
    if (h < 0 || srtp.length < h + TAG) return null;
    const seq = srtp.readUInt16BE(2);
    const ssrc = srtp.readUInt32BE(8);
    // Looked at, not kept, until the packet authenticates: forged packets of made-up SSRCs must not push the
    // call's own stream out of the map (its rollover counter with it).
    const s = this.streams.get(ssrc) ?? newStream();
    // RFC 3711 appendix A: guess the rollover counter from the highest sequence number seen.
    let roc = s.roc;
    if (s.lastSeq >= 0) {
      if (s.lastSeq < 0x8000) {
        if (seq - s.lastSeq > 0x8000) roc = s.roc - 1;
      } else if (s.lastSeq - 0x8000 > seq) roc = s.roc + 1;
    }
    if (roc < 0) return null;
    const body = srtp.subarray(0, srtp.length - TAG);
    const expected = this.tag(body, roc);
    if (!timingSafeEqual(expected, srtp.subarray(srtp.length - TAG))) return null;
    const index = roc * 0x10000 + seq;
    if (!fresh(s, index)) return null;
    if (!this.streams.has(ssrc)) this.keep(ssrc, s);
    const c = createCipheriv('aes-128-ctr', this.encKey, this.iv(ssrc, index));
    return Buffer.concat([body.subarray(0, h), c.update(body.subarray(h))]);
  }
}

/**
 * One SSRC's stream under a key: its rollover counter and the last sequence number (sending: the last sent;
 * receiving: of the highest index received, `roc * 2^16 + lastSeq`), and, receiving, which of the
 * `REPLAY_WINDOW` indexes up to that highest one came (bit n: highest - n).
 */
interface SrtpStream {
  roc: number;
  lastSeq: number;
  window: bigint;
}

const newStream = (): SrtpStream => ({ roc: 0, lastSeq: -1, window: 0n });

/**
 * Whether an authenticated packet's index was not received before on its stream, remembering it (RFC 3711
 * 3.3.2) and moving the stream's highest index on: one replayed, or older than the window, is dropped, so a
 * recorded packet (a keyed digit) cannot be sent again.
 */
function fresh(s: SrtpStream, index: number): boolean {
  const highest = s.lastSeq < 0 ? -1 : s.roc * 0x10000 + s.lastSeq;
  if (index > highest) {
    const ahead = highest < 0 ? REPLAY_WINDOW : index - highest;
    s.window = ahead >= REPLAY_WINDOW ? 1n : ((s.window << BigInt(ahead)) | 1n) & WINDOW_MASK;
    s.roc = Math.floor(index / 0x10000);
    s.lastSeq = index % 0x10000;
    return true;
  }
  const behind = highest - index;
  if (behind >= REPLAY_WINDOW) return false;
  const bit = 1n << BigInt(behind);
  if (s.window & bit) return false;
  s.window |= bit;
  return true;
}

/** Streams a context keeps at once. */
const MAX_STREAMS = 8;

/** Packets behind the highest one received that are still taken, once each (RFC 3711's minimum, 64). */
const REPLAY_WINDOW = 64;
const WINDOW_MASK = (1n << BigInt(REPLAY_WINDOW)) - 1n;
