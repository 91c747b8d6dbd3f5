/**
 * Sample-rate conversion for speech, in plain code: linear interpolation up, and a boxcar-averaged
 * decimation down (enough for speech into G.711 and for a recogniser; not a mastering filter).
 */
export function resample(input: Int16Array, from: number, to: number): Int16Array {
  if (from === to) return input;
  const n = Math.floor((input.length * to) / from);
  const out = new Int16Array(n);
  const step = from / to;
  if (step > 1) {
    // Down: average the input samples each output sample covers (a crude low-pass against aliasing).
    for (let i = 0; i < n; i++) {
      const a = Math.floor(i * step);
      const b = Math.min(input.length, Math.floor((i + 1) * step));
      let sum = 0;
      for (let j = a; j < b; j++) sum += input[j];
      out[i] = b > a ? Math.round(sum / (b - a)) : input[a] ?? 0;
    }
    return out;
  }
  for (let i = 0; i < n; i++) {
    const x = i * step;
    const a = Math.floor(x);
    const f = x - a;
    const s0 = input[a] ?? 0;
    const s1 = input[a + 1] ?? s0;
    out[i] = Math.round(s0 + (s1 - s0) * f);
  }
  return out;
}

/** The 16-bit samples and rate of a PCM WAV file (mono, or the first channel). */
export function readWav(buf: Buffer): { rate: number; samples: Int16Array } {
  if (buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') throw new Error('not a WAV file');
  let off = 12;
  let rate = 0;
  let channels = 1;
  let bits = 16;
  while (off + 8 <= buf.length) {
    const id = buf.toString('ascii', off, off + 4);
    let size = buf.readUInt32LE(off + 4);
    const body = off + 8;
    if (id === 'fmt ') {
      channels = buf.readUInt16LE(body + 2);
      rate = buf.readUInt32LE(body + 4);
      bits = buf.readUInt16LE(body + 14);
    } else if (id === 'data') {
      // espeak-ng writing to a pipe cannot seek back: its data size is left as 0 or 0xffffffff.
      if (size === 0 || size === 0xffffffff || body + size > buf.length) size = buf.length - body;
      if (bits !== 16) throw new Error(`WAV of ${bits}-bit samples`);
      const frames = Math.floor(size / (2 * channels));
      const samples = new Int16Array(frames);
      for (let i = 0; i < frames; i++) samples[i] = buf.readInt16LE(body + i * 2 * channels);
      return { rate, samples };
    }
    off = body + size + (size % 2);
  }
  throw new Error('WAV without data');
}
