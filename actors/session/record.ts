import type { Collection, Doc, Store } from '../../store/mod.js';

/**
 * The read model of a session for the live-agent desk and the Conversations API: who it belongs to, its
 * status (`active`, `waiting` for a live agent, `live`, `ended`) and its handoff. Projected from the session
 * actors' journal (`projector.ts`), behind the steps it shows; `snapshot_version` is the version of the
 * last step applied. The Messaging API's own answers never read it.
 */
export interface SessionRecord extends Doc {
  account_id: string;
  project_id: string;
  connector_id: string;
  environment: string;
  status: 'active' | 'waiting' | 'live' | 'ended';
  streaming_enabled: boolean;
  platform: string;
  user_agent: string;
  /** The conversation the session drives (its id is the session id). */
  conversation_id: string;
  created_at: string;
  updated_at: string;
  ended_at: string | null;
  end_reason: string | null;
  handoff: { destination: string; reason: string; mode: string; queue_position: number | null; queued_at: string | null } | null;
  live_agent: { id: string; name: string; avatar_url: string } | null;
  /** The user's typing state (`TYPING_STATE_STARTED` / `_STOPPED`), for the desk. */
  user_typing: string;
  snapshot_version: number;
}

export const sessionRecords = (store: Store): Collection<SessionRecord> =>
  store.collection<SessionRecord>({ name: 'messaging_sessions', indexes: [{ fields: ['account_id', 'status'] }], readModel: true });
