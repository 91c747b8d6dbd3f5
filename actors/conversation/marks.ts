/**
 * The read model of marked values (`conv.mark_pii`, journaled as `conversation.pii_marked` in the step of the
 * turn that called the function): `conversation_pii_marks`, one record per conversation that has any, the
 * values in the order they were first marked. The Conversations API masks a key's rows and searches with them
 * (`gateway/edge/conversations/mask.ts`); the recordings read the journal instead (`actors/recording/marks.ts`).
 *
 * Written by the `conversations` projector (`projectors/conversations.ts`), in the batch that writes the turns
 * they mask and before them, and kept by its reset: a turn is never readable before its marks. As a projection
 * of its own, projected beside the turns, a turn was shown raw until that other projection caught up (after the
 * turn, while it failed or lagged, while it was rebuilt): `test/conversations.marks-window.test.ts`.
 */
import type { JournalEntry, Store } from '../../store/mod.js';

interface MarksRecord {
  id: string;
  values: string[];
  [k: string]: unknown;
}

/**
 * The values of a conversation that mask its turns and mute its recording: the first this many distinct values
 * marked, in the order they were first marked, for both readers (the projection keeps every value; a function
 * that marks endlessly must not make each read scan more). Values marked after them are neither masked nor muted
 * (docs/recordings.md).
 */
export const MAX_MARKED_VALUES = 1000;

export const conversationMarks = (store: Store) => store.collection<MarksRecord>({ name: 'conversation_pii_marks', readModel: true });

/** The values an entry marks, in order (none for most). */
export const marksIn = (entry: Pick<JournalEntry, 'events'>): string[] =>
  entry.events.flatMap((e) => (e.type === 'conversation.pii_marked' && Array.isArray(e.data.values) ? (e.data.values as unknown[]).filter((v): v is string => typeof v === 'string') : []));

/**
 * Adds the values of a conversation's entries to its record, once each: idempotent, and the same values in the
 * same order whether the entries come one by one (live) or all at once (a rebuild's replay).
 */
export async function addMarks(store: Store, conversationId: string, values: string[]): Promise<void> {
  if (values.length > 0) await conversationMarks(store).update({ id: conversationId }, { $addToSet: { values: { $each: values } } }, { upsert: true });
}

/**
 * The values marked in each of several conversations, in one read (a conversation without marks maps to an
 * empty list): what a page of rows or a search window needs at once.
 */
export async function projectedMarksOf(store: Store, conversationIds: string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>(conversationIds.map((id) => [id, []]));
  if (conversationIds.length === 0) return out;
  for (const r of await conversationMarks(store).find({ id: { $in: conversationIds } })) out.set(r.id, (r.values ?? []).slice(0, MAX_MARKED_VALUES));
  return out;
}
