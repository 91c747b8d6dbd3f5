import { createActor, fromCallback, type AnyActorRef, type AnyStateMachine } from 'xstate';

/**
 * The one XState actor system that all actors of a host live in.
 *
 * XState gives every root actor a system of its own: a registry, a scheduler and an inspection hub, fourteen
 * closures and four hash tables, which made up a third of what an idle actor held in memory. An
 * actor created with a parent joins the parent's system instead, so each machine actor is created as a child
 * of one root that does nothing. What that changes, and why it is safe here:
 * - the machine's done and error events are relayed to the root, which ignores them; the host learns of
 *   both through its subscription, as before;
 * - XState's `stop()` refuses an actor with a parent, so `stop` calls `_stop()`, what XState's own
 *   `stopChild` calls; it unregisters the actor from the system;
 * - system ids would be shared by all actors of the host: no machine of the catalog uses one, and the
 *   runtime refuses at start a kind whose machine does (`admitMachine`);
 * - delayed events would share the scheduler, keyed by each actor's session id; the machines use none
 *   (durable timers are invoked tasks, `timers.ts`).
 */
export class ActorSystem {
  private readonly root: AnyActorRef = createActor(fromCallback(() => undefined)).start();

  /** A machine actor in this system, not started. */
  create(machine: AnyStateMachine, options: { snapshot?: unknown; input?: unknown }): AnyActorRef {
    return createActor(machine, { parent: this.root, snapshot: options.snapshot, input: options.input } as never);
  }

  /** Stops an actor created by `create` (and its children); stopping it again does nothing. */
  stop(actor: AnyActorRef): void {
    (actor as unknown as { _stop(): void })._stop();
  }

  /** Stops the root: after every actor of the system has stopped. */
  close(): void {
    this.root.stop();
  }
}

/** Refuses a machine that invokes an actor with a system id: all actors of a host share one system. */
export function admitMachine(kind: string, machine: AnyStateMachine): void {
  const invoking = systemIdIn(machine.root);
  if (!invoking) return;
  throw new Error(`actor kind ${kind}: state ${invoking} invokes an actor with a system id, which all actors of a host would share`);
}

interface Node {
  id: string;
  invoke: Array<{ systemId?: string }>;
  states: Record<string, Node>;
}

/** The id of the first state node under `node` that invokes with a system id, or null. */
function systemIdIn(node: Node): string | null {
  if (node.invoke.some((i) => i.systemId !== undefined)) return node.id;
  for (const key in node.states) {
    const found = systemIdIn(node.states[key]);
    if (found) return found;
  }
  return null;
}
