/** The 44-byte RIFF/WAVE header of 16-bit mono PCM (what every player reads). */
export function wavHeader(dataBytes: number, sampleRate: number): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write('WAVE', 8, 'ascii');
  h.write('fmt ', 12, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/** Two little-endian 16-bit tracks on one timeline mixed into one (summed, clipped); the shorter is padded. */
export function mix(a: Buffer, b: Buffer): Buffer {
  const n = Math.max(a.length, b.length) & ~1;
  const out = Buffer.alloc(n);
  for (let o = 0; o < n; o += 2) {
    const s = (o + 1 < a.length ? a.readInt16LE(o) : 0) + (o + 1 < b.length ? b.readInt16LE(o) : 0);
    out.writeInt16LE(s > 32767 ? 32767 : s < -32768 ? -32768 : s, o);
  }
  return out;
}
