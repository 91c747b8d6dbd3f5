/**
 * Values the agent's functions marked as personal data (`conv.mark_pii`, journaled as
 * `conversation.pii_marked`). Never rendered: the redacted recording mutes where the caller said or keyed
 * them, and redacted transcripts mask them.
 *
 * Two readers, two sources. The recordings projector and the audio endpoint's first rendering read the
 * conversation's journal (`markedValues`): exact, and once per call. The Conversations API masks page rows
 * from `conversation_pii_marks`, which the `conversations` projector writes with the turns they mask
 * (`actors/conversation/marks.ts`).
 */
import type { Store } from '../../store/mod.js';
import { marksIn, MAX_MARKED_VALUES } from '../conversation/mod.js';

/** The values marked in a conversation, from its journal: the same first `MAX_MARKED_VALUES` as the projection's. */
export async function markedValues(store: Store, conversationId: string): Promise<string[]> {
  const entries = await store.journal.ofActor(`conversation/${conversationId}`);
  return [...new Set(entries.flatMap(marksIn))].slice(0, MAX_MARKED_VALUES);
}
