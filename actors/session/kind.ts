import { fromPromise } from 'xstate';
import { sessionMachine, sessionStatus, type SessionContext, type SessionReply } from '../../machines/session.js';
import type { ActorKind } from '../kinds.js';
import { encode } from '../protocol.js';
import { sleepUntil } from '../timers.js';
import type { Transport } from '../transport/types.js';
import { sessionEffects, type SessionDeps } from './effects.js';
import { Journal } from './journal.js';
import { sessionRecords, type SessionRecord } from './record.js';
import { toWire } from './wire.js';

/** The per-session topic every gateway holding sockets of the session subscribes to. */
export const sessionTopic = (sessionId: string): string => `sb.sessions.${sessionId}`;

/** What travels on a session topic: new events, each with its sequence (null: transient) and wire JSON. */
export type Published = Array<{ s: number | null; j: string }>;

/** How many sessions' flush positions a worker remembers (older ones fall back to the journal's uniqueness). */
const REMEMBERED_SESSIONS = 50_000;

/**
 * The `session` actor kind. With every persisted snapshot it flushes the machine's new events: journaled
 * ones are appended to the journal (unique by session and sequence), then every new one is published on
 * the session's topic; and the session record is written when what it shows changed.
 *
 * Flushing happens alongside the snapshot's write. A fresh activation (after passivation or a failover) does
 * not know what was flushed: it appends the outbox's journaled events again and publishes only those the
 * journal did not have, and of the transient ones only those of the event at hand (older ones are dropped:
 * they are transient).
 */
export function sessionKind(deps: SessionDeps & { transport: () => Promise<Transport> }): ActorKind {
  const effects = sessionEffects(deps);
  const journal = new Journal(deps.store);
  const records = sessionRecords(deps.store);
  const flushed = new Map<string, number>();
  const shown = new Map<string, string>();
  const machine = sessionMachine.provide({
    actors: {
      startAgent: fromPromise(({ input }) => effects.startAgent(input)),
      converse: fromPromise(({ input }) => effects.converse(input)),
      closeConversation: fromPromise(({ input }) => effects.closeConversation(input)),
      queuePosition: fromPromise(({ input }) => effects.queuePosition(input)),
      sleepUntil,
    },
  });

  const remember = <V>(map: Map<string, V>, id: string, value: V) => {
    map.delete(id);
    map.set(id, value);
    if (map.size > REMEMBERED_SESSIONS) map.delete(map.keys().next().value!);
  };

  /**
   * Appends the outbox's new journaled events; resolves, once they are durable, with what to publish.
   * Synchronous up to the appends, so they join the commit of the snapshot and record written alongside.
   */
  const append = (id: string, c: SessionContext): Promise<Published> | null => {
    const known = flushed.get(id);
    const fresh = c.outbox.filter((e) => known === undefined || e.n > known);
    if (!fresh.length) return null;
    const wire = fresh.map((e) => JSON.stringify(toWire(id, e)));
    // All appends at once: they share the store's group commit (a streamed reply is many events).
    return Promise.all(fresh.map((e, i) => (e.seq !== null ? journal.append(id, e.seq, wire[i]) : true))).then((added) => {
      const out: Published = [];
      fresh.forEach((e, i) => {
        if (known === undefined && (e.seq !== null ? !added[i] : e.n <= c.mark)) return;
        out.push({ s: e.seq, j: wire[i] });
      });
      remember(flushed, id, fresh[fresh.length - 1].n);
      return out;
    });
  };

  /** Writes the session record when what it shows changed (null when it did not); synchronous up to the write. */
  const project = (value: unknown, c: SessionContext, id: string, version: number): Promise<void> | null => {
    if (!c.info) return null;
    const now = new Date().toISOString();
    const view = {
      status: sessionStatus(value),
      ended_at: c.endedAt ? new Date(c.endedAt).toISOString() : null,
      end_reason: c.endReason,
      handoff: c.handoff
        ? {
            destination: c.handoff.destination,
            reason: c.handoff.reason,
            mode: c.handoff.mode,
            queue_position: c.handoff.queuePosition,
            queued_at: c.handoff.queuedAt ? new Date(c.handoff.queuedAt).toISOString() : null,
          }
        : null,
      live_agent: c.liveAgent,
      user_typing: c.userTyping,
    };
    const key = JSON.stringify(view);
    if (shown.get(id) === key) return null;
    const record: Omit<SessionRecord, 'id'> = {
      account_id: c.info.accountId,
      project_id: c.info.projectId,
      connector_id: c.info.connectorId,
      environment: c.info.environment,
      streaming_enabled: c.info.streaming,
      platform: c.info.platform,
      user_agent: c.info.userAgent,
      conversation_id: id,
      created_at: new Date(c.info.createdAt).toISOString(),
      updated_at: now,
      ...view,
      snapshot_version: version,
    };
    // Written whole (no filter to compile, no update to apply); an older snapshot's record never wins.
    return records.putNewer({ id, ...record } as SessionRecord, 'snapshot_version').then(() => remember(shown, id, key));
  };

  return {
    name: 'session',
    machine,
    input: (id) => ({ id }),
    reply: (s): SessionReply => (s.context as SessionContext).reply ?? { ok: false, error: 'not_found' },
    project: async (s, id, version) => {
      const c = s.context as SessionContext;
      // The record and the journal appends are issued in the same tick as the snapshot (the activation calls
      // this before handing the snapshot to the commit queue), so all share one durable commit. Publishing
      // waits for both: a gateway that sees an event may read the record next, and a journaled event is
      // durable before any socket sees it.
      const [, out] = await Promise.all([project(s.value, c, id, version), append(id, c)]);
      if (out?.length) (await deps.transport()).publish(sessionTopic(id), encode(out));
    },
  };
}

