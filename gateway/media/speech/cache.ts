/** How many synthesized pieces are kept: agents repeat greetings, prompts and fallbacks a lot. */
export const TTS_CACHE_ENTRIES = 256;
/** The most bytes of samples kept in all (16 MiB: about 17 minutes of 8 kHz speech). */
export const TTS_CACHE_BYTES = 16 * 1024 * 1024;
/** A piece whose samples are larger than this (1 MiB: about 65 s of speech) is not kept: it is no greeting. */
export const TTS_CACHE_PIECE_MAX_BYTES = 1024 * 1024;

interface Entry {
  made: Promise<Int16Array>;
  /** The samples' size once made (0 while synthesizing). */
  bytes: number;
}

/**
 * The speech a text-to-speech engine made, by key (voice, rate, text), least recently used first out, bounded by
 * entries and by bytes: every new text of every call adds an entry, and entries bounded by count alone held
 * whatever a tenant had spoken (hundreds of megabytes for a few long texts). A synthesis in flight is shared by
 * its callers and counts as an entry; its bytes count once it is made, and a failed one is forgotten.
 */
export class SpeechCache {
  private readonly entries = new Map<string, Entry>();
  private held = 0;

  constructor(private readonly limits: { entries: number; bytes: number; pieceBytes: number } = { entries: TTS_CACHE_ENTRIES, bytes: TTS_CACHE_BYTES, pieceBytes: TTS_CACHE_PIECE_MAX_BYTES }) {}

  /** The samples of `key`: kept ones, else what `make` makes (kept when small enough). */
  get(key: string, make: () => Promise<Int16Array>): Promise<Int16Array> {
    const hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit.made;
    }
    const entry: Entry = { made: make(), bytes: 0 };
    this.entries.set(key, entry);
    entry.made.then(
      (pcm) => {
        if (this.entries.get(key) !== entry) return;
        if (pcm.byteLength > this.limits.pieceBytes) {
          this.entries.delete(key);
          return;
        }
        entry.bytes = pcm.byteLength;
        this.held += entry.bytes;
        this.trim();
      },
      () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    this.trim();
    return entry.made;
  }

  /** How many entries and bytes are kept now. */
  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.held };
  }

  private trim(): void {
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= this.limits.entries && this.held <= this.limits.bytes) return;
      this.entries.delete(key);
      this.held -= entry.bytes;
    }
  }
}
