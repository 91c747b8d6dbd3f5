import type { AnyActorRef } from 'xstate';

/**
 * A machine actor's persisted snapshot as XState's `getPersistedSnapshot` makes it (the same keys in the same
 * order, so the same bytes once encoded), without its search of the whole context for actor references: that
 * search visits every object the context holds on every step, to replace references the host's machines never
 * keep there (they invoke their effects; none spawns into its context). Were one kept, the encoder would still
 * write it as XState does, by the actor's `toJSON`. The search and the snapshot's rest-spread were a measurable
 * share of a step's main-thread time (bench/README.md, seventh session). `test/actors.persisted.test.ts` checks
 * the bytes against XState's on every path of every machine of the catalog.
 */
export function persistedSnapshot(actor: AnyActorRef): unknown {
  const s = actor.getSnapshot();
  const children: Record<string, unknown> = {};
  for (const id in s.children) {
    // `src`, `systemId` and `_syncSnapshot` are what XState itself reads here; its public type leaves them out.
    const child = s.children[id] as AnyActorRef & { src: unknown; systemId: unknown; _syncSnapshot: unknown };
    if (typeof child.src !== 'string') throw new Error('An inline child actor cannot be persisted.');
    children[id] = { snapshot: child.getPersistedSnapshot(), src: child.src, systemId: child.systemId, syncSnapshot: child._syncSnapshot };
  }
  return { status: s.status, output: s.output, error: s.error, value: s.value, historyValue: historyOf(s.historyValue), context: s.context, children };
}

/** XState's serialised history: each history state's remembered nodes by id. */
function historyOf(history: unknown): Record<string, Array<{ id: string }>> {
  const out: Record<string, Array<{ id: string }>> = {};
  if (typeof history !== 'object' || history === null) return out;
  for (const key in history) {
    const nodes = (history as Record<string, unknown>)[key];
    if (Array.isArray(nodes)) out[key] = nodes.map((n: { id: string }) => ({ id: n.id }));
  }
  return out;
}
