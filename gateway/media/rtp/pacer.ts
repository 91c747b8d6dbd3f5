import { FRAME_MS } from './codec.js';

/**
 * One clock for every call of the process: each tick (every 20 ms of the monotonic clock) asks each
 * registered stream for its next frame. One timer for all calls instead of one per call keeps the event
 * loop's timer list short at hundreds of calls; ticks are scheduled against absolute times, so a late
 * tick does not drift the ones after it, and a stream that fell behind by more than a few frames (a blocked
 * event loop) skips ahead rather than bursting.
 */
export class Pacer {
  private readonly streams = new Set<() => void>();
  private timer: NodeJS.Timeout | null = null;
  private next = 0;

  /** Calls `tick` every frame until the returned function is called. */
  add(tick: () => void): () => void {
    this.streams.add(tick);
    if (!this.timer) {
      this.next = performance.now() + FRAME_MS;
      this.schedule();
    }
    return () => {
      this.streams.delete(tick);
      if (this.streams.size === 0 && this.timer) {
        clearTimeout(this.timer);
        this.timer = null;
      }
    };
  }

  private schedule(): void {
    this.timer = setTimeout(() => this.fire(), Math.max(0, this.next - performance.now()));
  }

  private fire(): void {
    const now = performance.now();
    // More than 3 frames behind: drop the backlog instead of sending it in a burst.
    if (now - this.next > 3 * FRAME_MS) this.next = now;
    for (const tick of this.streams) {
      try {
        tick();
      } catch {
        // One call's failure never stops the others' audio.
      }
    }
    this.next += FRAME_MS;
    if (this.streams.size) this.schedule();
    else this.timer = null;
  }
}
