import type { JournalEntry, Store } from '../../store/mod.js';
import type { Projector } from '../projection/mod.js';
import { sessionRecords, type SessionRecord } from './record.js';

const iso = (ms: number) => new Date(ms).toISOString();

/** Folds one session step's events onto its record; null while the session was never created. */
function fold(record: SessionRecord | null, entry: JournalEntry): SessionRecord | null {
  let r = record;
  for (const { type, data: d } of entry.events) {
    if (type === 'session.started') {
      r = {
        id: entry.id,
        account_id: d.account_id as string,
        project_id: d.project_id as string,
        connector_id: d.connector_id as string,
        environment: d.environment as string,
        status: 'active',
        streaming_enabled: d.streaming === true,
        platform: d.platform as string,
        user_agent: d.user_agent as string,
        conversation_id: entry.id,
        created_at: iso(d.created_at as number),
        updated_at: iso(entry.at),
        ended_at: null,
        end_reason: null,
        handoff: null,
        live_agent: null,
        user_typing: '',
        snapshot_version: entry.version,
      };
      continue;
    }
    if (!r) continue;
    switch (type) {
      case 'session.typing':
        r = { ...r, user_typing: d.state as string };
        break;
      case 'session.handoff_triggered':
        r = {
          ...r,
          handoff: {
            destination: d.destination as string,
            reason: d.reason as string,
            mode: d.mode as string,
            queue_position: null,
            queued_at: d.mode === 'server' ? iso(d.at as number) : null,
          },
        };
        break;
      case 'session.queue_status':
        if (r.handoff) r = { ...r, handoff: { ...r.handoff, queue_position: (d.position as number | null) ?? null } };
        break;
      case 'session.handoff_accepted':
        r = { ...r, status: 'waiting' };
        break;
      case 'session.live_agent_joined':
        r = { ...r, status: 'live', live_agent: d.agent as SessionRecord['live_agent'] };
        break;
      case 'session.ended':
        r = { ...r, status: 'ended', ended_at: iso(d.at as number), end_reason: d.reason as string };
        break;
      default:
        continue;
    }
    r.updated_at = iso(entry.at);
  }
  return r ? { ...r, snapshot_version: entry.version } : null;
}

/** Whether a step's events change anything the record shows. */
const RECORDED = new Set(['session.started', 'session.typing', 'session.handoff_triggered', 'session.queue_status', 'session.handoff_accepted', 'session.live_agent_joined', 'session.ended']);

/**
 * The `messaging_sessions` read model (the desk's lists and the Conversations API's session fields), folded
 * from the session actors' journal. Idempotent: a step at or below the record's `snapshot_version` was
 * applied already (the runner may hand an entry again after a crash), and a write never lowers it.
 */
export const sessionRecordsProjector: Projector = {
  name: 'messaging_sessions',
  kinds: ['session'],
  async apply(entries: JournalEntry[], store: Store): Promise<void> {
    const records = sessionRecords(store);
    const byId = new Map<string, JournalEntry[]>();
    for (const e of entries) {
      if (e.kind !== 'session' || !e.events.some((x) => RECORDED.has(x.type))) continue;
      const list = byId.get(e.id);
      if (list) list.push(e);
      else byId.set(e.id, [e]);
    }
    await Promise.all(
      [...byId].map(async ([id, list]) => {
        const stored = await records.get(id);
        let r = stored;
        for (const e of list) if (!r || e.version > r.snapshot_version) r = fold(r, e);
        if (r && r !== stored) await records.putNewer(r, 'snapshot_version');
      }),
    );
  },
  async reset(store: Store): Promise<void> {
    await sessionRecords(store).delete({});
  },
};
