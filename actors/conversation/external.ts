import { createHash } from 'node:crypto';
import type { Collection, Doc, Store } from '../../store/mod.js';
import type { ExternalEvent, ExternalWait } from '../../machines/conversation.js';

/**
 * External events (contract 4.8): what the webhook stored and which conversation waits for which id. Both are
 * keyed by project and event id together (`externalEventKey`), so one project's id never reaches another
 * project's conversation, and a second delivery of the same event finds the first.
 *
 * The webhook writes the event, then reads the wait; a conversation that starts waiting writes the wait, then
 * reads the event (`watchExternalEvent`). Whichever comes second sees the other, so an event that arrives
 * before anyone waits is delivered when the wait starts; when both see each other the conversation handles
 * the id once (it remembers the ids it handled).
 *
 * A wait's record lasts as long as the wait: once the event or the deadline settles the wait it is deleted, by
 * the webhook that delivered the event (`deleteExternalWait`) or by the conversation (`settleExternalWait`: the
 * deadline, or an event its watch found), and a worker's sweep deletes those nothing settled, long after their
 * deadline (`external-sweep.ts`). Otherwise the collection grew by a record for every wait ever started.
 */

/** A stored external event: the body as it came, its content type and what the webhook parsed of it. */
export interface ExternalEventRecord extends Doc {
  account_id: string;
  project_id: string;
  event_id: string;
  content_type: string;
  body: string;
  data: unknown;
  received_at: string;
  /** The conversation it was handed to (null while nobody waits for it). */
  conversation_id: string | null;
  delivered_at: string | null;
}

/** A conversation waiting for an external event id of its project. */
export interface ExternalWaitRecord extends Doc {
  project_id: string;
  event_id: string;
  conversation_id: string;
  deadline: string;
}

/** The key of an event id within a project: the record id of both the event and the wait. */
export function externalEventKey(projectId: string, eventId: string): string {
  return `xev_${createHash('sha256').update(projectId).update('\n').update(eventId).digest('hex').slice(0, 32)}`;
}

export function externalEventRecords(store: Store): Collection<ExternalEventRecord> {
  return store.collection<ExternalEventRecord>({ name: 'external_events', indexes: [{ fields: ['project_id', 'received_at'] }] });
}

export function externalWaitRecords(store: Store): Collection<ExternalWaitRecord> {
  return store.collection<ExternalWaitRecord>({ name: 'external_waits', indexes: [{ fields: ['conversation_id'] }] });
}

/** The event as the `external_event` function receives it. */
export function externalEventOf(r: ExternalEventRecord): ExternalEvent {
  return { id: r.event_id, content_type: r.content_type, body: r.body, data: r.data ?? null, timed_out: false, received_at: r.received_at };
}

/**
 * The conversation's side of the handshake: registers its wait (idempotent: an effect restarted after a
 * restore writes the same record), then returns the event if it arrived already.
 */
export function externalWatch(store: Store) {
  const events = externalEventRecords(store);
  const waits = externalWaitRecords(store);
  return async (input: { id: string; projectId: string; wait: ExternalWait }): Promise<ExternalEvent | null> => {
    const key = externalEventKey(input.projectId, input.wait.eventId);
    await waits.update(
      { id: key },
      { $set: { project_id: input.projectId, event_id: input.wait.eventId, conversation_id: input.id, deadline: new Date(input.wait.deadline).toISOString() } },
      { upsert: true },
    );
    const found = await events.get(key);
    if (!found || found.project_id !== input.projectId) return null;
    // An event another conversation already took is not given to a second one that waits for the same id.
    if (found.conversation_id !== null && found.conversation_id !== input.id && found.delivered_at !== null) return null;
    if (found.conversation_id !== input.id) {
      await events.update({ id: key }, { $set: { conversation_id: input.id, delivered_at: new Date().toISOString() } });
    }
    return externalEventOf(found);
  };
}

/**
 * The conversation's side of a wait's end (before `external_event` runs): deletes the record of the wait of
 * conversation `id` for the event's id, and only that conversation's (another conversation of the project may
 * have started waiting for the same id since; its wait stands), when nothing can need it again:
 *
 * - the deadline passed (`timed_out`): a snapshot restored from before this step fires the same timer again;
 * - the watch found the event (it marked the event as this conversation's before handing it over).
 *
 * An event the webhook brought is left to the webhook (`deleteExternalWait`, once the conversation's answer,
 * durable, said it took the event): this effect runs before the step is committed, and a worker that died
 * between the two would restore the conversation waiting, with no record for the webhook's retry to find.
 * A wait that function starts, for the same id too, is written after this (`waiting.checking`), so it is never
 * the one deleted.
 */
export async function settleExternalWait(store: Store, input: { id: string; projectId: string; event: ExternalEvent }): Promise<void> {
  const key = externalEventKey(input.projectId, input.event.id);
  if (!input.event.timed_out) {
    const found = await externalEventRecords(store).get(key);
    if (!found || found.conversation_id !== input.id || found.delivered_at === null) return;
  }
  await externalWaitRecords(store).delete({ id: key, conversation_id: input.id });
}

/**
 * The webhook's side: deletes the wait it read, once the conversation took the event. The delete names the wait's
 * conversation and deadline, so a wait registered since (the function waited again) stands.
 */
export async function deleteExternalWait(store: Store, wait: ExternalWaitRecord): Promise<void> {
  await externalWaitRecords(store).delete({ id: wait.id, conversation_id: wait.conversation_id, deadline: wait.deadline });
}
