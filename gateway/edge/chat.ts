import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ActorAskError, type Runtime } from '../../actors/mod.js';
import { conversationOwner, pickVariant, runningContent } from '../../actors/conversation/mod.js';
import { sessionHistory } from '../../actors/session/mod.js';
import { attributesBytes, type ConversationEvent, type Outcome } from '../../machines/conversation.js';
import type { Bucket } from '../../platform/config.js';
import { CHAT, RateLimitedError } from '../../platform/errors.js';
import { uuidv7 } from '../../platform/ids.js';
import { RateLimiter } from '../../platform/rate-limit.js';
import type { Services } from '../../platform/services.js';
import { timings } from '../../platform/timings.js';
import { credentialsFirst, header, resolvePathProject } from './auth.js';
import { useErrorShape } from './errors.js';
import { JsonObject, PathId } from './schemas.js';

const CHANNELS = { webchat: 'WEBCHAT', whatsapp: 'WHATSAPP', sms: 'SMS', api: 'API' } as const;
const LANG = /^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$/;
const LangCode = z.string().regex(LANG, 'must be a language code such as en or en-US');
/** A speech voice is chosen by language and region (contract 4.6: "language code with region"). */
const REGION = /^(?:[A-Za-z]{2}|\d{3})$/;
const hasRegion = (code: string) => code.split(/[-_]/).slice(1).some((subtag) => REGION.test(subtag));
const TtsLangCode = LangCode.refine(hasRegion, 'must be a language code with region such as en-US');
const ErrorBody = z.object({ error_message: z.string() });
const errors = { 400: ErrorBody, 401: ErrorBody, 404: ErrorBody, 409: ErrorBody, 422: ErrorBody, 429: ErrorBody, 503: ErrorBody };
const Params = z.object({ version: z.string().regex(/^v\d{1,3}$/, 'malformed version'), account_id: PathId, project_id: PathId });
const ConversationId = z
  .string({ error: (issue) => (issue.input === undefined ? 'conversation_id is required' : 'conversation_id must be a string') })
  .min(1, 'conversation_id is required')
  .max(128, 'conversation_id is at most 128 characters');
/** The longest user message a turn takes (`message`, `initial_message`). */
const MAX_MESSAGE = 32_768;
const Message = (field: string) => z.string().max(MAX_MESSAGE, `${field} is at most ${MAX_MESSAGE} characters`);

/** How many conversation → project facts the edge keeps (about 150 bytes each). */
const KNOWN_CONVERSATIONS = 50_000;

export interface ChatOptions {
  services: Services;
  runtime: Runtime;
  /** An idle chat ends by itself this long after its last turn. */
  idleTimeoutMs: number;
  /**
   * The most bytes of JSON a conversation's integration attributes hold once a request's are merged in
   * (`CONVERSATION_MAX_ATTRIBUTES_BYTES`): a request's own past it are refused here; the merge is the conversation's
   * to check (`MESSAGE.maxAttributesBytes`), as only it holds what earlier requests brought.
   */
  maxAttributesBytes: number;
  /**
   * How long a turn (create's greeting, respond) is waited for before the 503: the slowest reply the responder
   * may make (`Config.turnWaitMs`). Unset: the runtime's ask timeout.
   */
  turnWaitMs?: number;
  /** Requests per API key (token bucket). */
  perKey: Bucket;
  /** Requests per project, every key of it together (token bucket). */
  perProject: Bucket;
}

type Reply = Outcome & { state: string };

/**
 * The Chat API (contract 4.6): turn-based create, respond and close under
 * `/{version}/{account_id}/{project_id}/chat/`, with an `X-API-KEY` of scope `chat` for the project and the
 * `X-TOKEN` of one of its chat connectors (which fixes the environment and, unless the request names one,
 * the variant). Each request is an ask to the conversation actor; the reply comes once the turn is durable.
 */
export const chatPlugin: FastifyPluginAsync<ChatOptions> = async (root, { services, runtime, idleTimeoutMs, maxAttributesBytes, turnWaitMs, perKey, perProject }) => {
  const app = root.withTypeProvider<ZodTypeProvider>();
  useErrorShape(app, 'error_message');
  const steps = timings;
  if (steps) {
    // Whole requests, from the first byte parsed to the response written.
    const started = new WeakMap<FastifyRequest, number>();
    app.addHook('onRequest', async (req) => void started.set(req, performance.now()));
    app.addHook('onResponse', async (req) => steps.since(`edge.request ${req.routeOptions.url?.split('/').pop()}`, started.get(req) ?? 0));
  }
  const keyLimiter = new RateLimiter(perKey.rate, perKey.burst);
  const projectLimiter = new RateLimiter(perProject.rate, perProject.burst);

  /**
   * Every request of a verified key costs a token of the key's bucket, then one of its project's: one key
   * (a leaked one, a client's retry loop) cannot flood the edge, and a project's keys together cannot take
   * more than the project's share. Checked after the credentials, so nobody spends another's tokens.
   */
  const limit = (keyId: string, projectId: string) => {
    const keyWait = keyLimiter.take(keyId);
    if (keyWait) throw new RateLimitedError(CHAT.RATE_LIMITED_KEY, keyWait);
    const projectWait = projectLimiter.take(projectId);
    if (projectWait) throw new RateLimitedError(CHAT.RATE_LIMITED_PROJECT, projectWait);
  };

  /** Checks both credentials against the path's account and project (id or slug form). */
  const authorize = async (req: FastifyRequest, params: z.infer<typeof Params>) => {
    if (params.version !== 'v1') throw CHAT.VERSION_NOT_FOUND(params.version);
    const apiKey = header(req, 'x-api-key');
    const token = header(req, 'x-token');
    if (!apiKey || !token) throw CHAT.CREDENTIALS_MISSING();
    const [key, connector] = await Promise.all([services.keys.verify(apiKey), services.connectors.verify(token)]);
    if (!key || key.scope !== 'chat') throw CHAT.API_KEY_INVALID();
    if (!connector || connector.kind !== 'chat') throw CHAT.TOKEN_INVALID();
    const { account, project } = await resolvePathProject(services, key.id, params.account_id, params.project_id);
    if (key.account_id !== account.id || key.project_id !== project.id) throw CHAT.API_KEY_OTHER_PROJECT();
    if (connector.account_id !== account.id || connector.project_id !== project.id) throw CHAT.TOKEN_OTHER_PROJECT();
    limit(key.id, project.id);
    // The edge's 5xx counts (api_errors) are per project.
    req.apiKey = key;
    req.tenant = key;
    return { account, project, connector, key };
  };

  const credentials = credentialsFirst((req) => authorize(req, req.params as z.infer<typeof Params>));
  app.addHook('onRequest', credentials.hook);

  /** The request's later log lines (its completion line included) name the conversation. */
  const aboutConversation = (req: FastifyRequest, reply: FastifyReply, id: string) => {
    req.log = req.log.child({ conversation_id: id });
    // Fastify writes the response line with the reply's logger.
    reply.log = req.log;
  };

  const ask = async (id: string, event: ConversationEvent): Promise<Reply> => {
    try {
      // A turn may wait on the model for longer than an ask's usual time: given up sooner, it would go on and be
      // kept while the client, told 503, sends it again.
      const timeoutMs = event.type === 'START' || event.type === 'MESSAGE' ? turnWaitMs : undefined;
      return await runtime.client.ask<Reply>('conversation', id, event, { timeoutMs });
    } catch (err) {
      if (err instanceof ActorAskError && err.code === 'DEADLINE') {
        throw CHAT.TIMEOUT();
      }
      throw err;
    }
  };

  /**
   * Conversations known to belong to a project: those this edge started, and those found in the journal. A
   * conversation's project never changes and its journal is never deleted, so a positive answer stays true:
   * later turns skip the journal read. Unknown and foreign
   * ids are always looked up (in the journal: its `conversation.started` event; never in the record, a
   * projection that may lag). Bounded; oldest out first.
   */
  const projectOf = new Map<string, string>();
  /** A connector reaches the conversations of its project and client environment (contract 5, rule 2). */
  const scope = (projectId: string, environment: string) => `${projectId}\u0000${environment}`;
  const known = (conversationId: string, projectId: string, environment: string) => {
    projectOf.set(conversationId, scope(projectId, environment));
    if (projectOf.size > KNOWN_CONVERSATIONS) projectOf.delete(projectOf.keys().next().value!);
  };
  /**
   * The conversation of this project started in this environment by the Chat API, or 404: another's is not
   * shown to exist, and a phone call's or a messaging session's is not the Chat API's to answer into or close.
   */
  const existing = async (projectId: string, environment: string, conversationId: string): Promise<void> => {
    if (projectOf.get(conversationId) === scope(projectId, environment)) return;
    const owner = await conversationOwner(services.store, conversationId);
    if (!owner || owner.projectId !== projectId || owner.environment !== environment) throw CHAT.CONVERSATION_NOT_FOUND();
    // A phone call of the project is not a chat: its turns come from the caller, and it ends when the call does.
    if (owner.channel.startsWith('VOICE')) throw CHAT.CONVERSATION_NOT_FOUND();
    // Nor is a Messaging API session's (its id is the session's): its user reads the session's socket, which a
    // Chat API turn would not reach, and the session, not the Chat API, ends it. The Chat API's own `webchat`
    // channel is WEBCHAT too, so the session's journal tells them apart (read once: the answer is then known).
    if (owner.channel === 'WEBCHAT' && (await sessionHistory(services.store).owner(conversationId)) !== null) throw CHAT.CONVERSATION_NOT_FOUND();
    known(conversationId, projectId, environment);
  };

  const refused = (r: Reply): never => {
    if (r.ok) throw new Error('not refused');
    const byReason = {
      ended: CHAT.CONVERSATION_ENDED,
      handed_off: CHAT.CONVERSATION_HANDED_OFF,
      not_started: CHAT.CONVERSATION_NOT_STARTED,
      started: CHAT.CONVERSATION_EXISTS,
      attributes_too_large: () => CHAT.ATTRIBUTES_TOO_LARGE(maxAttributesBytes),
    };
    throw byReason[r.error]();
  };

  /**
   * A request's integration attributes, or the 400 when they alone are past the bound: merged into the
   * conversation's they would be too (the merge holds every key given, with the value given), so the conversation
   * need not be asked.
   */
  const attributes = (given: Record<string, unknown> | undefined): Record<string, unknown> => {
    if (given === undefined) return {};
    if (attributesBytes(given) > maxAttributesBytes) throw CHAT.ATTRIBUTES_TOO_LARGE(maxAttributesBytes);
    return given;
  };

  app.post('/:version/:account_id/:project_id/chat/create', {
    schema: {
      tags: ['chat'],
      summary: 'Start a conversation; answers with its id and the opening reply',
      params: Params,
      body: z
        .object({
          integration_attributes: JsonObject.optional(),
          variant_id: z.string().min(1).max(128).optional(),
          channel: z.enum(['webchat', 'whatsapp', 'sms', 'api']).optional(),
          asr_lang_code: LangCode.optional(),
          tts_lang_code: TtsLangCode.optional(),
          initial_message: Message('initial_message').optional(),
        })
        .default({}),
      response: { 200: z.object({ conversation_id: z.string(), response: z.string() }), ...errors },
    },
  }, async (req, res) => {
    const { account, project, connector } = credentials.of(req);
    const variantId = req.body.variant_id ?? connector.variant_id;
    // Before anything is started: a conversation's first attributes are a request's, checked whole here.
    const integrationAttributes = attributes(req.body.integration_attributes);
    if (req.body.variant_id) {
      const running = await runningContent(services.builder, project.id, connector.environment);
      if (!running || !pickVariant(running.content, req.body.variant_id)) throw CHAT.VARIANT_UNKNOWN();
    }
    // Sorts by time: the store keeps live conversations together (platform/ids.ts).
    const id = uuidv7();
    aboutConversation(req, res, id);
    const reply = await ask(id, {
      type: 'START',
      start: {
        accountId: account.id,
        projectId: project.id,
        environment: connector.environment,
        channel: req.body.channel ? CHANNELS[req.body.channel] : 'CHAT',
        variantId: variantId ?? null,
        integrationAttributes,
        asrLangCode: req.body.asr_lang_code ?? '',
        ttsLangCode: req.body.tts_lang_code ?? '',
        initialMessage: req.body.initial_message ?? null,
        fromNumber: '',
        toNumber: '',
        at: Date.now(),
        idleTimeoutMs,
      },
    });
    if (!reply.ok) refused(reply);
    // Started here, in this project: its first respond need not look for its start in the journal.
    known(id, project.id, connector.environment);
    return { conversation_id: id, response: reply.ok ? reply.response : '' };
  });

  app.post('/:version/:account_id/:project_id/chat/respond', {
    schema: {
      tags: ['chat'],
      summary: 'Send a user message; answers with the agent reply',
      params: Params,
      body: z.object({
        conversation_id: ConversationId,
        message: Message('message').optional(),
        integration_attributes: JsonObject.optional(),
        metadata: JsonObject.optional(),
        asr_lang_code: LangCode.optional(),
        tts_lang_code: TtsLangCode.optional(),
      }, { error: 'body must be a JSON object with conversation_id' }),
      response: {
        200: z.object({
          conversation_id: z.string(),
          response: z.string(),
          end_conversation: z.boolean(),
          handoff: z.object({ destination: z.string(), reason: z.string() }).optional(),
        }),
        ...errors,
      },
    },
  }, async (req, res) => {
    const t0 = timings ? performance.now() : 0;
    const { project, connector } = credentials.of(req);
    if (timings) timings.since('edge.authorize', t0);
    const integrationAttributes = attributes(req.body.integration_attributes);
    const t1 = timings ? performance.now() : 0;
    aboutConversation(req, res, req.body.conversation_id);
    await existing(project.id, connector.environment, req.body.conversation_id);
    if (timings) timings.since('edge.existing', t1);
    const t2 = timings ? performance.now() : 0;
    const reply = await ask(req.body.conversation_id, {
      type: 'MESSAGE',
      message: req.body.message ?? '',
      metadata: req.body.metadata ?? {},
      integrationAttributes,
      // The merge with the conversation's is checked by the conversation, against this bound.
      maxAttributesBytes,
      asrLangCode: req.body.asr_lang_code,
      ttsLangCode: req.body.tts_lang_code,
      at: Date.now(),
    });
    if (timings) timings.since('edge.ask (respond)', t2);
    if (!reply.ok) return refused(reply);
    return {
      conversation_id: req.body.conversation_id,
      response: reply.response,
      end_conversation: reply.end,
      ...(reply.handoff ? { handoff: reply.handoff } : {}),
    };
  });

  app.put('/:version/:account_id/:project_id/chat/close', {
    schema: {
      tags: ['chat'],
      summary: 'End a conversation',
      params: Params,
      body: z.object({ conversation_id: ConversationId }, { error: 'body must be a JSON object with conversation_id' }),
      response: { 200: z.object({ success: z.boolean() }), ...errors },
    },
  }, async (req, res) => {
    const { project, connector } = credentials.of(req);
    aboutConversation(req, res, req.body.conversation_id);
    await existing(project.id, connector.environment, req.body.conversation_id);
    const reply = await ask(req.body.conversation_id, { type: 'CLOSE', at: Date.now() });
    return { success: reply.ok };
  });
};
