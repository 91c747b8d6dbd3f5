import { encode, FRAME_SAMPLES, type Codec } from './codec.js';

/** Cuts 8 kHz linear audio into 20 ms G.711 frames (the last one padded with silence). */
export function packetize(codec: Codec, pcm: Int16Array): Buffer[] {
  const frames: Buffer[] = [];
  for (let i = 0; i < pcm.length; i += FRAME_SAMPLES) {
    let chunk = pcm.subarray(i, i + FRAME_SAMPLES);
    if (chunk.length < FRAME_SAMPLES) {
      const padded = new Int16Array(FRAME_SAMPLES);
      padded.set(chunk);
      chunk = padded;
    }
    frames.push(encode(codec, chunk));
  }
  return frames;
}
