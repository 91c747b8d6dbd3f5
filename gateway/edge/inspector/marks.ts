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
 * The marks that mask a live stream (`feed.ts`, the SSE of `plugin.ts`), kept up to date with each batch of its
 * steps. A conversation's marks are journaled in its own steps, so a batch's are added without a read; any other
 * actor's conversation (a session's, a call's) is read from the entries after the last one read: the embedded
 * store reads a recent `afterVersion` at the cost of what it returns, where a read of the whole journal at every
 * batch cost the conversation's length. Once `MAX_MARKED_VALUES` are kept (the first, as `markedValues` keeps)
 * nothing is read: no later mark would be.
 */
export class MarksTracker {
  private values: string[] = [];
  /** The conversation read, and the version of its last entry read (0: none yet). */
  private conversationId: string | null = null;
  private version = 0;

  constructor(private readonly store: Store, private readonly kind: string, private readonly id: string) {}

  /** The marks before the stream's first step: the conversation's, read whole. */
  async first(context: unknown): Promise<string[]> {
    return this.after(context, []);
  }

  /** The marks after a batch of the actor's steps, `context` the actor's newest. */
  async after(context: unknown, steps: readonly Step[]): Promise<string[]> {
    const conversationId = conversationOf(this.kind, this.id, context);
    // A call's context may name its conversation only from some step on.
    if (conversationId !== this.conversationId) {
      this.conversationId = conversationId;
      this.values = [];
      this.version = 0;
    }
    if (conversationId === null) return this.values;
    if (this.kind === 'conversation' && this.version > 0) return this.add(steps.flatMap(marksIn), steps.reduce((v, s) => Math.max(v, s.version), 0));
    if (this.values.length >= MAX_MARKED_VALUES) return this.values;
    const entries = await this.store.journal.ofActor(`conversation/${conversationId}`, this.version > 0 ? { afterVersion: this.version } : undefined);
    // An empty journal (no step yet) reads whole again next time, as it must: it has no version to read after.
    return this.add(entries.flatMap(marksIn), entries.reduce((v, e) => Math.max(v, e.version), 0));
  }

  /** Adds marks read up to `version`, the highest of the entries read (one appended, a recording's, has 0). */
  private add(marked: string[], version: number): string[] {
    this.version = Math.max(this.version, version);
    if (marked.length > 0) this.values = [...new Set([...this.values, ...marked])].slice(0, MAX_MARKED_VALUES);
    return this.values;
  }
}
