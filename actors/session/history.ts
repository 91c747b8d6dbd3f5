import type { JournalEntry, Store } from '../../store/mod.js';
import { renderStep, type Frame } from './wire.js';

/** The newest steps a windowed read of a session's journal reads first (`back`). */
const FIRST_WINDOW = 16;

/** The actor journal's key of a session. */
export const sessionKey = (sessionId: string): string => `session/${sessionId}`;

/** Who a session belongs to, as its creation committed it. */
export interface SessionOwner {
  account_id: string;
  project_id: string;
  connector_id: string;
}

/**
 * A session's history as the Messaging API reads it: straight from the actor journal (what the session's
 * steps committed), rendered by the wire module. No projection is read: a replay holds every event that was
 * committed before it was read, whether or not it has been published yet.
 */
export function sessionHistory(store: Store) {
  const journal = () => store.journal;
  const journaled = (id: string, entries: JournalEntry[]) => entries.flatMap((e) => renderStep(id, e, true)).filter((f) => f.s !== null);
  /**
   * The session's replayable frames from its newest steps back to (at least) the one with sequence `after`, in
   * order; `whole` when they are all it has. A reconnection or a catch-up misses the last few frames of what
   * may be a long session, and the embedded store reads an actor's newest entries at the cost of what it
   * returns: windows growing fourfold cost at most a third more than the one that holds the frame, where a
   * read from the start would cost the whole journal each time. Sequences grow with the steps, so once a
   * window holds a frame at or below `after` it holds every frame above it.
   */
  const back = async (id: string, after: number): Promise<{ frames: Frame[]; whole: boolean }> => {
    if (after <= 0) return { frames: journaled(id, await journal().ofActor(sessionKey(id))), whole: true };
    for (let n = FIRST_WINDOW; ; n *= 4) {
      const entries = await journal().ofActor(sessionKey(id), { last: n });
      const frames = journaled(id, entries);
      const whole = entries.length < n;
      if (whole || (frames.length > 0 && frames[0]!.s! <= after)) return { frames, whole };
    }
  };
  return {
    /** The replayable frames with a sequence above `after`, in order (at most `limit`). */
    async after(id: string, after: number, limit = Infinity): Promise<Frame[]> {
      const frames = (await back(id, after)).frames.filter((f) => f.s! > after);
      return frames.length > limit ? frames.slice(0, limit) : frames;
    },
    /**
     * What a socket resuming at `cursor` is sent: the frames after it, and the session's last sequence. A cursor
     * past that sequence names no position of this session (one from another session, or from before a
     * restore): it is `past`, and the frames are the whole history, as for an invalid cursor (contract 4.7).
     */
    async resume(id: string, cursor: number): Promise<{ frames: Frame[]; head: number; past: boolean }> {
      const { frames, whole } = await back(id, cursor);
      const head = frames.length > 0 ? frames[frames.length - 1]!.s! : 0;
      if (cursor > head) return { frames: whole ? frames : journaled(id, await journal().ofActor(sessionKey(id))), head, past: true };
      return { frames: frames.filter((f) => f.s! > cursor), head, past: false };
    },
    /** The frame at one sequence (a duplicate client event is answered with its original echo), or null. */
    async at(id: string, seq: number): Promise<string | null> {
      return (await back(id, seq - 1)).frames.find((f) => f.s === seq)?.j ?? null;
    },
    /**
     * Who the session belongs to, from its first step (its creation); null when it was never created. A session's
     * conversation has the session's id, so this also tells a session's conversation from one another interface
     * started (the Chat API refuses it). One entry is read, the first (`JournalStore.ofActor`).
     */
    async owner(id: string): Promise<SessionOwner | null> {
      const [first] = await journal().ofActor(sessionKey(id), { limit: 1 });
      const started = first?.events.find((e) => e.type === 'session.started');
      if (!started) return null;
      const d = started.data as Record<string, string>;
      return { account_id: d.account_id, project_id: d.project_id, connector_id: d.connector_id };
    },
    /**
     * Whether the session is over (ending or ended), from the state its newest step committed: one read of the
     * actor's last entry. A session never reopens, so a later step cannot make this false again.
     */
    async closed(id: string): Promise<boolean> {
      const [last] = await journal().ofActor(sessionKey(id), { last: 1 });
      return last?.value === 'ending' || last?.value === 'ended';
    },
  };
}
export type SessionHistory = ReturnType<typeof sessionHistory>;
