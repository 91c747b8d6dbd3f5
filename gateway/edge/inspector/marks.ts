/**
 * The values a conversation's functions marked personal (`conv.mark_pii`), which the inspector's masked view
 * hides wherever they appear in an actor's context and events: the `conversation.pii_marked` events that carry
 * them, an agent's answer that repeats one, a session's frame that delivers that answer. Read from the
 * conversation's journal (`markedValues`, as the recordings read them), not from the `conversation_pii_marks`
 * projection: a live feed renders a step as soon as it is committed, before any projection has it.
 */
import { marksIn, MAX_MARKED_VALUES } from '../../../actors/conversation/mod.js';
import { markedValues } from '../../../actors/recording/mod.js';
import type { Store } from '../../../store/mod.js';
import type { Step } from './steps.js';

/**
 * The conversation whose marks mask an actor: a conversation's own; a messaging session's, which is the
 * conversation of the session's id (the session asks the conversation actor of its own id,
 * `actors/session/effects.ts`; its context names none); else the one its context names (an outbound call's).
 */
export function conversationOf(kind: string, id: string, context: unknown): string | null {
  if (kind === 'conversation' || kind === 'session') return id;
  const named = context && typeof context === 'object' ? (context as { conversationId?: unknown }).conversationId : undefined;
  return typeof named === 'string' && named !== '' ? named : null;
}

/** The marked values that mask an actor's view (none when it belongs to no conversation). */
export async function marksFor(store: Store, kind: string, id: string, context: unknown): Promise<string[]> {
  const conversationId = conversationOf(kind, id, context);
  return conversationId === null ? [] : markedValues(store, conversationId);
}

/**
 * The marks after a live stream's next batch of steps, `known` those before it. A conversation's marks are journaled
 * in its own steps, so the batch's are added without a read (the first `MAX_MARKED_VALUES`, as `markedValues`
 * keeps); any other actor's conversation is read again, since its steps do not carry that conversation's marks.
 */
export async function marksAfter(store: Store, kind: string, id: string, context: unknown, known: readonly string[], steps: readonly Step[]): Promise<string[]> {
  if (kind !== 'conversation') return marksFor(store, kind, id, context);
  const added = steps.flatMap(marksIn);
  return added.length === 0 ? [...known] : [...new Set([...known, ...added])].slice(0, MAX_MARKED_VALUES);
}
