import alawmulaw from 'alawmulaw';

/** The G.711 codecs a call can use, by their static RTP payload types (RFC 3551). */
export type Codec = 'PCMU' | 'PCMA';
export const PAYLOAD_TYPE: Record<Codec, number> = { PCMU: 0, PCMA: 8 };
/** Telephony audio: 8 kHz mono; one 20 ms frame is 160 samples (and 160 bytes of G.711). */
export const SAMPLE_RATE = 8000;
export const FRAME_MS = 20;
export const FRAME_SAMPLES = (SAMPLE_RATE * FRAME_MS) / 1000;

/** 16-bit linear samples to G.711 bytes. */
export function encode(codec: Codec, pcm: Int16Array): Buffer {
  const out = codec === 'PCMU' ? alawmulaw.mulaw.encode(pcm) : alawmulaw.alaw.encode(pcm);
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

/** G.711 bytes to 16-bit linear samples. */
export function decode(codec: Codec, bytes: Uint8Array): Int16Array {
  return codec === 'PCMU' ? alawmulaw.mulaw.decode(bytes) : alawmulaw.alaw.decode(bytes);
}
