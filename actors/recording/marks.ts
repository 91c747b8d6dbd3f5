/**
 * Values the agent's functions marked as personal data (`conv.mark_pii`, journaled as
 * `conversation.pii_marked`). Never rendered: the redacted recording mutes where the caller said or keyed
 * them, and redacted transcripts mask them.
 *
 * Two readers, two sources. The recordings projector and the audio endpoint's first rendering read the
 * conversation's journal (`markedValues`): exact, and once per call. The Conversations API masks page rows,
 * one point read each, from `conversation_pii_marks`, written by the `pii-marks` projector.
 */
import type { JournalEntry, Store } from '../../store/mod.js';
import type { Projector } from '../projection/types.js';

interface MarksRecord {
  id: string;
  values: string[];
  [k: string]: unknown;
}

const MAX_VALUES = 1000;

const marksOf = (store: Store) => store.collection<MarksRecord>({ name: 'conversation_pii_marks', readModel: true });

const valuesIn = (entry: JournalEntry): string[] =>
  entry.events.flatMap((e) => (e.type === 'conversation.pii_marked' && Array.isArray(e.data.values) ? (e.data.values as unknown[]).filter((v): v is string => typeof v === 'string') : []));

/** The values marked in a conversation, from its journal. */
export async function markedValues(store: Store, conversationId: string): Promise<string[]> {
  const entries = await store.journal.ofActor(`conversation/${conversationId}`);
  return [...new Set(entries.flatMap(valuesIn))].slice(0, MAX_VALUES);
}

/** The values marked in a conversation, from the projection (empty when none). */
export async function projectedMarks(store: Store, conversationId: string): Promise<string[]> {
  return (await marksOf(store).get(conversationId))?.values ?? [];
}

/**
 * The values marked in each of several conversations, from the projection, in one read (a conversation
 * without marks maps to an empty list): what a page of rows or a search window needs at once.
 */
export async function projectedMarksOf(store: Store, conversationIds: string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>(conversationIds.map((id) => [id, []]));
  if (conversationIds.length === 0) return out;
  for (const r of await marksOf(store).find({ id: { $in: conversationIds } })) out.set(r.id, r.values ?? []);
  return out;
}

/** The `pii-marks` projector: one record per conversation that has marked values, the values added once each. */
export const piiMarksProjector: Projector = {
  name: 'pii-marks',
  kinds: ['conversation'],
  async apply(entries, store) {
    for (const entry of entries) {
      const values = valuesIn(entry);
      if (values.length) await marksOf(store).update({ id: entry.id }, { $addToSet: { values: { $each: values } } }, { upsert: true });
    }
  },
  async reset(store) {
    await marksOf(store).delete({});
  },
};
