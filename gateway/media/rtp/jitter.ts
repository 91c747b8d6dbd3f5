import type { RtpPacket } from './packet.js';

/**
 * A small reordering buffer: packets come out in sequence order, at most `depth` packets late. A packet
 * older than the last one played is dropped (it arrived too late to be heard); a gap that stays longer than
 * `depth` packets is skipped. Audio here feeds a recogniser, not a loudspeaker, so the buffer only has to
 * restore order, not to smooth playout timing.
 */
/** How far behind the playout point a packet may be and still count as merely late (RFC 3550 A.1). */
const MAX_MISORDER = 100;

export class JitterBuffer {
  private readonly held = new Map<number, RtpPacket>();
  private next = -1;
  constructor(private readonly depth = 3) {}

  /** Takes a packet; returns those now ready, in order. */
  push(p: RtpPacket): RtpPacket[] {
    if (this.next < 0) this.next = p.sequence;
    const behind = (this.next - p.sequence) & 0xffff;
    if (behind !== 0 && behind < 0x8000) {
      // Far behind is not a late packet but a restarted stream (a new source, a sender replaying from an
      // earlier number, as RFC 3550 A.1 reads a jump beyond its misorder window): start again from it.
      if (behind <= MAX_MISORDER) return [];
      this.held.clear();
      this.next = p.sequence;
    }
    this.held.set(p.sequence, p);
    const out: RtpPacket[] = [];
    for (;;) {
      const ready = this.held.get(this.next);
      if (ready) {
        this.held.delete(this.next);
        out.push(ready);
        this.next = (this.next + 1) & 0xffff;
        continue;
      }
      if (this.held.size > this.depth) {
        // The missing packet is lost: skip to the oldest one held.
        this.next = this.oldest();
        continue;
      }
      return out;
    }
  }

  private oldest(): number {
    let best = -1;
    let bestDistance = 0x10000;
    for (const seq of this.held.keys()) {
      const d = (seq - this.next) & 0xffff;
      if (d < bestDistance) {
        bestDistance = d;
        best = seq;
      }
    }
    return best;
  }
}
