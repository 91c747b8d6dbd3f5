import type { Builder } from '../../builder/mod.js';
import type { Outcome } from '../../machines/conversation.js';
import type { AgentReply, CloseInput, ConverseInput, PushedHandoffInput, QueueInput, SessionInfo, StartAgentInput } from '../../machines/session.js';
import type { Store } from '../../store/mod.js';
import type { Environment } from '../../tenancy/connectors.js';
import { ActorAskError, type ActorClient } from '../client.js';
import { ApiKeys } from '../../tenancy/keys.js';
import { sessionRecords } from './record.js';

/** What the session effects run with. `client` resolves once the runtime (built after its kinds) is up. */
export interface SessionDeps {
  store: Store;
  builder: Builder;
  client: () => Promise<ActorClient>;
  /** An idle conversation ends by itself this long after its last turn (as on the Chat API). */
  conversationIdleMs: number;
  /**
   * How long a turn (the greeting, a message) is waited for before it is called overloaded: long enough for the
   * slowest reply the responder may make, which then ends in its own answer or apology. Given up sooner, the turn
   * would go on unseen and the next message, queued behind it in the conversation, would be dropped.
   */
  turnWaitMs: number;
}

type ConversationReply = Outcome & { state: string };

/**
 * The conversation kept the turn, but its agent could not answer it (its responder failed) and neither hands off
 * nor ends: the client is told so with contract 7.4's error, not an agent message.
 */
const unanswered = (r: ConversationReply): boolean => r.ok && !!r.failed && !r.handoff && !r.end;

/** How a handoff goes, from the project's real-time config variable `handoff_mode` (default `server`). */
const HANDOFF_MODES = new Set(['server', 'client']);

/**
 * The session machine's effects. Each asks the session's conversation actor (kind `conversation`, id = the
 * session id, channel WEBCHAT) with an event id fixed by the machine, so an effect restarted after a
 * failover gets the conversation's remembered answer instead of a second turn. The asks are ordered
 * (`AskOptions.ordered`): on the embedded host the turn answers once its commit is queued, so the agent's
 * message does not wait for the turn's commit to be durable.
 */
export function sessionEffects(deps: SessionDeps) {
  const records = sessionRecords(deps.store);
  const keys = new ApiKeys(deps.store);

  const empty = (at: number): AgentReply => ({
    at,
    failure: null,
    text: '',
    suggestions: [],
    end: false,
    handoff: null,
    handoffMode: 'server',
    queuePosition: null,
    agentName: '',
    agentAvatarUrl: '',
  });

  const variables = (info: SessionInfo) => deps.builder.realtimeConfigs.effective(info.projectId, info.environment as Environment).catch(() => ({}) as Record<string, unknown>);

  const ask = async (id: string, event: { type: string } & Record<string, unknown>, eventId: string, timeoutMs?: number): Promise<ConversationReply | 'overload' | 'error'> => {
    try {
      // Ordered: the answer goes only into this session's next step, whose commit is queued behind the turn's.
      return await (await deps.client()).ask<ConversationReply>('conversation', id, event, { eventId, ordered: true, timeoutMs });
    } catch (err) {
      return err instanceof ActorAskError && err.code === 'DEADLINE' ? 'overload' : 'error';
    }
  };

  /** Turns the conversation's answer into the agent's reply, deciding how a handoff goes. */
  const reply = async (info: SessionInfo, r: ConversationReply, vars: Record<string, unknown>): Promise<AgentReply> => {
    const out = empty(Date.now());
    if (!r.ok) return { ...out, failure: 'stream' };
    out.text = r.response;
    out.end = r.end;
    out.handoff = r.handoff;
    const suggestions = vars.response_suggestions;
    if (Array.isArray(suggestions)) out.suggestions = suggestions.filter((s): s is string => typeof s === 'string').slice(0, 10);
    if (r.handoff) {
      const mode = typeof vars.handoff_mode === 'string' ? vars.handoff_mode : 'server';
      if (!HANDOFF_MODES.has(mode)) out.handoffMode = 'invalid';
      else if (mode === 'client') out.handoffMode = 'client';
      else if (!(await keys.list({ account_id: info.accountId })).some((k) => k.scope === 'live_agent')) out.handoffMode = 'unavailable';
      else {
        out.handoffMode = 'server';
        out.queuePosition = (await records.count({ account_id: info.accountId, status: 'waiting' })) + 1;
      }
    }
    return out;
  };

  return {
    /** How a handoff an external event's function made goes: as a turn's would (`reply`), after what it said. */
    async decideHandoff(input: PushedHandoffInput): Promise<AgentReply> {
      return reply(input.info, { ok: true, response: input.text, end: false, handoff: input.handoff, state: 'handedOff' }, await variables(input.info));
    },

    async startAgent(input: StartAgentInput): Promise<AgentReply> {
      const { info } = input;
      const answer = await ask(input.sessionId, {
        type: 'START',
        start: {
          accountId: info.accountId,
          projectId: info.projectId,
          environment: info.environment,
          channel: 'WEBCHAT',
          variantId: info.variantId,
          integrationAttributes: { platform: info.platform, ...(info.userAgent ? { user_agent: info.userAgent } : {}) },
          asrLangCode: '',
          ttsLangCode: '',
          initialMessage: null,
          fromNumber: '',
          toNumber: '',
          at: input.at,
          idleTimeoutMs: deps.conversationIdleMs,
        },
      }, input.askId, deps.turnWaitMs);
      if (answer === 'overload') return { ...empty(Date.now()), failure: 'overload' };
      if (answer === 'error' || !answer.ok) return { ...empty(Date.now()), failure: 'start' };
      const vars = await variables(info);
      const agent = await deps.builder.agents.access({ accountId: info.accountId, projectId: null, keyId: '' }, info.projectId).catch(() => null);
      const out = await reply(info, answer, vars);
      if (unanswered(answer)) out.greetingFailed = true;
      out.agentName = typeof vars.agent_name === 'string' ? vars.agent_name : agent?.name ?? 'Agent';
      out.agentAvatarUrl = typeof vars.agent_avatar_url === 'string' ? vars.agent_avatar_url : '';
      return out;
    },

    async converse(input: ConverseInput): Promise<AgentReply> {
      const answer = await ask(input.sessionId, {
        type: 'MESSAGE',
        message: input.text,
        metadata: {},
        integrationAttributes: {},
        ...(input.language ? { asrLangCode: input.language, ttsLangCode: input.language } : {}),
        at: input.at,
      }, input.askId, deps.turnWaitMs);
      if (answer === 'overload') return { ...empty(Date.now()), failure: 'overload' };
      if (answer === 'error') return { ...empty(Date.now()), failure: 'respond' };
      // Ended under the session (its idle expiry, the session kept alive by heartbeats): the session ends with it,
      // rather than answering this and every later message with an apology.
      if (!answer.ok && 'error' in answer && answer.error === 'ended') return { ...empty(Date.now()), conversationEnded: true };
      // Contract 7.4 by cause: the model did not answer, or its answer broke off or was not valid data.
      if (unanswered(answer)) return { ...empty(Date.now()), failure: answer.ok && answer.failed ? answer.failed : 'respond' };
      return reply(input.info, answer, await variables(input.info));
    },

    /** The session's place among its account's sessions waiting for a live agent (earlier ones first). */
    async queuePosition(input: QueueInput): Promise<{ at: number; position: number }> {
      const ahead = await records.count({ account_id: input.accountId, status: 'waiting', 'handoff.queued_at': { $lt: new Date(input.queuedAt).toISOString() } });
      return { at: Date.now(), position: ahead + 1 };
    },

    async closeConversation(input: CloseInput): Promise<number> {
      // Only a conversation that was started has anything to close (asking would create an empty actor).
      if (input.started) {
        // As long as a turn: a CLOSE queued behind one still running would otherwise expire there unapplied.
        await ask(input.sessionId, { type: 'CLOSE', at: input.at }, input.askId, deps.turnWaitMs);
      }
      return Date.now();
    },
  };
}
