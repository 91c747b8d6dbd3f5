import { converseInput, sessionMachine } from '../../machines/session.js';
import { IDLE_EXPIRY, type ActorKind } from '../kinds.js';
import { encodeFor } from '../protocol.js';
import { fromEffect } from '../task.js';
import { sleepUntil } from '../timers.js';
import type { Transport } from '../transport/types.js';
import type { JournalEntry, JournalEvent } from '../../store/mod.js';
import { sessionEffects, type SessionDeps } from './effects.js';
import { renderStep, replyOf, type Frame, type SessionReply } from './wire.js';

/** The client_event_id a journaled echo carries in its `custom`, if any (for the fault injection below). */
const clientEventIdOf = (e: JournalEvent): unknown => {
  const custom = e.data.custom;
  return custom && typeof custom === 'object' ? (custom as { client_event_id?: unknown }).client_event_id : undefined;
};

/** The per-session topic every gateway holding sockets of the session subscribes to. */
export const sessionTopic = (sessionId: string): string => `sb.sessions.${sessionId}`;

/** What travels on a session topic: the frames of one committed step, each with its sequence (null: transient). */
export type Published = Frame[];

/**
 * The `session` actor kind. The host commits each step's snapshot with the events it emitted (the actor
 * journal); the ask's answer comes from those events (`replyOf`), and once the step is durable its frames
 * are published on the session's topic (`published`). Nothing else is written here: replay reads the
 * journal, and the session records are a projection (`projector.ts`).
 */
export function sessionKind(deps: SessionDeps & { transport: () => Promise<Transport> }): ActorKind {
  const effects = sessionEffects(deps);
  const machine = sessionMachine.provide({
    actors: {
      startAgent: fromEffect(effects.startAgent),
      closeConversation: fromEffect(effects.closeConversation),
      queuePosition: fromEffect(effects.queuePosition),
      decideHandoff: fromEffect(effects.decideHandoff),
      sleepUntil,
    },
  });
  let transport: Transport | null = null;
  // Fault injection for the crash tests: the worker dies right after committing a step that holds a user
  // message with exactly this text, or a client event with exactly this client_event_id, before publishing it
  // (the window a replay must cover).
  const killBeforePublish = process.env.SESSION_FAULT_KILL_BEFORE_PUBLISH || null;
  const kind = {
    name: 'session',
    machine,
    input: (id: string) => ({ id }),
    reply: (_s: unknown, _event: { type: string }, emitted: JournalEvent[] = []): SessionReply => replyOf(emitted),
    // A turn, run by the host while the agent is `responding` (tagged `turn`): no child actor per message.
    effect: {
      tag: 'turn',
      input: converseInput,
      run: effects.converse,
      done: (output: unknown) => ({ type: 'TURN_DONE', output }),
      failed: (error: unknown) => ({ type: 'TURN_FAILED', error }),
      // The reply goes to sockets, not to an asker who would retry: a new owner must take the turn up by itself.
      resumeAtOnce: true,
    },
    // The idle expiry, kept by the host: the machine's `expires` states end once it has passed.
    deadline: IDLE_EXPIRY,
    published: (id: string, entry: JournalEntry): void => {
      if (killBeforePublish && entry.events.some((e) => (e.type === 'session.user_message' && e.data.text === killBeforePublish) || clientEventIdOf(e) === killBeforePublish)) process.kill(process.pid, 'SIGKILL');
      const frames = renderStep(id, entry);
      if (!frames.length) return;
      if (transport) transport.publish(sessionTopic(id), encodeFor(transport, frames));
      else void deps.transport().then((t) => (transport = t).publish(sessionTopic(id), encodeFor(t, frames)));
    },
  };
  return kind as unknown as ActorKind;
}
