import type { JournalEntry, Store } from '../../store/mod.js';
import { renderStep, type Frame } from './wire.js';

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
  const journaled = (id: string, entries: JournalEntry[]) => entries.flatMap((e) => renderStep(id, e, true));
  return {
    /** The replayable frames with a sequence above `after`, in order (at most `limit`). */
    async after(id: string, after: number, limit = Infinity): Promise<Frame[]> {
      const frames = journaled(id, await journal().ofActor(sessionKey(id))).filter((f) => f.s! > after);
      return frames.length > limit ? frames.slice(0, limit) : frames;
    },
    /**
     * What a socket resuming at `cursor` is sent: the frames after it, and the session's last sequence. A cursor
     * past that sequence names no position of this session (one from another session, or from before a
     * restore): it is `past`, and the frames are the whole history, as for an invalid cursor (contract 4.7).
     */
    async resume(id: string, cursor: number): Promise<{ frames: Frame[]; head: number; past: boolean }> {
      const all = journaled(id, await journal().ofActor(sessionKey(id))).filter((f) => f.s !== null);
      const head = all.length > 0 ? all[all.length - 1].s! : 0;
      if (cursor > head) return { frames: all, head, past: true };
      return { frames: all.filter((f) => f.s! > cursor), head, past: false };
    },
    /** The frame at one sequence (a duplicate client event is answered with its original echo), or null. */
    async at(id: string, seq: number): Promise<string | null> {
      const entries = await journal().ofActor(sessionKey(id));
      return journaled(id, entries).find((f) => f.s === seq)?.j ?? null;
    },
    /** Who the session belongs to, from its first step (its creation); null when it was never created. */
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
