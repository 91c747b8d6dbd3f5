import type { Builder, Content } from '../../builder/mod.js';
import { CONVERSATION_MAX_TRANSCRIPT_BYTES, transcriptBytes, turnBytes } from '../../machines/conversation.js';
import type { ConversationStart, DeliverInput, EndInput, ExternalWait, Handoff, ResponderFailure, SideInput, SideOutcome, StartInput, TurnInput, TurnOutcome, TurnRecord, VoiceInput } from '../../machines/conversation.js';
import type { ActorClient } from '../client.js';
import type { Environment } from '../../tenancy/connectors.js';
import type { ConvInput, FunctionSandbox, InvokeResult } from '../functions/types.js';
import { failureOf } from '../responder/failure.js';
import type { KnowledgeTopic, Responder, ResponderContext, ResponderReply, ToolFunction } from '../responder/types.js';
import { artifactCache, pickVariant, runningContent, variantOnPin } from './deployment.js';
import { isoOf } from '../../platform/clock.js';
import { inSpan, SpanKind, SpanStatusCode } from '../../platform/telemetry.js';

/** What the conversation effects run with. */
export interface ConversationDeps {
  builder: Builder;
  sandbox: FunctionSandbox;
  responder: Responder;
  functionTimeoutMs: number;
  /**
   * The most bytes a conversation's transcript holds (`CONVERSATION_MAX_TRANSCRIPT_BYTES`, counted as `turnBytes`
   * does; the default is the machine's constant): what a function would say past it is a function error, and a
   * turn that reaches it ends the conversation.
   */
  maxTranscriptBytes?: number;
  /** The waits of `conv.await_external_event`: without `timeout_ms`, and the longest allowed. */
  externalEvents?: { defaultTimeoutMs: number; maxTimeoutMs: number };
  /** Reaches the webchat session of a conversation (what an external event said is pushed to it at once). */
  client?: () => Promise<ActorClient>;
  /** Whether a messaging session of this id exists (a Chat API conversation labelled `webchat` has none). */
  hasSession?: (id: string) => Promise<boolean>;
}

/** Hooks the platform calls; never offered to the responder as tools. */
const HOOKS = new Set(['start', 'turn', 'end', 'external_event', 'bridge_ended']);
/** The longest external event id a function may wait for (the webhook refuses longer ones). */
export const MAX_EXTERNAL_EVENT_ID = 256;
/**
 * The shortest wait a function may ask for (a shorter `timeout_ms`, 0 or negative included, is raised to it). A
 * wait that expired at once let `external_event` wait again at once and run again, a loop of its own with no
 * client traffic; the floor spaces the rounds of any chain of timeouts a second apart at least (and
 * `MAX_TIMEOUT_ROUNDS` in `machines/conversation.ts` ends one). `EXTERNAL_EVENT_MAX_TIMEOUT_MS` is at least this.
 */
export const MIN_EXTERNAL_EVENT_TIMEOUT_MS = 1000;
/**
 * The fallback when the responder fails, by cause, in contract 7.4's words: "agent failed to respond", "stream
 * interrupted or invalid data". The Messaging API sends the same words as its error event (`actors/session/wire.ts`).
 */
const APOLOGY: Record<ResponderFailure, string> = {
  respond: "Sorry, I'm having trouble responding right now. Please try again.",
  stream: 'Sorry, I encountered an error. Please try again.',
};


/** A call's turn as the record keeps it: keyed digits apart from words, barge-in, silence. */
const withVoice = (r: TurnRecord, v: VoiceInput | undefined): TurnRecord =>
  v ? { ...r, user_input: v.dtmf && r.user_input === v.dtmf ? '' : r.user_input, user_input_dtmf: v.dtmf ?? '', barge_in: v.bargeIn === true, is_silence: v.silence === true } : r;

/**
 * What the transcript records of a hook's call, the texts its turn's answer joins with spaces: for `turn`, a
 * non-empty string it returned, else what it said; for the other hooks, what it said and then a non-empty string it
 * returned. Measured against the transcript's limit before anything the call did is applied (`invoke`).
 */
const recorded = (name: string, said: string[], value: unknown): string[] => {
  const returned = typeof value === 'string' && value !== '';
  if (name === 'turn') return returned ? [value] : said;
  return returned ? [...said, value] : said;
};

/** What the responder said, or the platform's apology in its place (`failed`: why). */
type Answer = ResponderReply & { failed?: ResponderFailure };

/** The mutable part of a conversation while an effect runs. */
interface Working {
  state: Record<string, unknown>;
  functionErrors: number;
  handoff: Handoff | null;
  end: boolean;
  awaiting: ExternalWait | null;
  /** Values the functions marked personal (`conv.mark_pii`). */
  pii?: string[];
  /** The responder failed on the last answer, and why: what it says is the platform's apology, not the agent's words. */
  failed?: ResponderFailure | null;
}

/**
 * The conversation machine's effects: start (the `start` function and the opening reply), a turn (the
 * `turn` function, else the responder, with project functions as its tools), and end (the `end` function).
 * Each reads the deployed content and real-time config variables afresh, so a config change applies at
 * the next turn without a publish. Effects are re-run whole if a worker dies mid-turn: they only compute,
 * and the actor's snapshot is written once they are done.
 */
export function conversationEffects(deps: ConversationDeps) {
  const artifacts = artifactCache(deps.builder);
  const maxTranscript = deps.maxTranscriptBytes ?? CONVERSATION_MAX_TRANSCRIPT_BYTES;
  /** What a call whose words would not fit is told (a function error, as an output over its limit is). */
  const transcriptFull = `what the function said would take the conversation's transcript past its limit of ${maxTranscript} bytes of UTF-8 text (CONVERSATION_MAX_TRANSCRIPT_BYTES)`;
  const waits = { defaultTimeoutMs: 3_600_000, maxTimeoutMs: 7 * 86_400_000, ...deps.externalEvents };
  /** A wait a function asked for, bounded: a valid id, a deadline from now within the allowed minimum and maximum. */
  const waitOf = (a: { event_id: string; timeout_ms: number | null } | null): ExternalWait | null => {
    if (!a || a.event_id === '' || a.event_id.length > MAX_EXTERNAL_EVENT_ID) return null;
    const ms = a.timeout_ms === null ? waits.defaultTimeoutMs : Math.min(Math.max(MIN_EXTERNAL_EVENT_TIMEOUT_MS, Math.floor(a.timeout_ms)), waits.maxTimeoutMs);
    return { eventId: a.event_id, deadline: Date.now() + ms };
  };
  /**
   * What a conversation runs: at start, what is deployed to its environment now; afterwards the artifact it
   * started on (a deployment mid-conversation applies to new conversations). One started with nothing deployed
   * pins nothing: each turn runs main's draft as it is then, until a turn (or an `external_event` or
   * `bridge_ended` run) finds a deployment, whose version its outcome pins from then on (docs/chat.md). Variables
   * are read every time.
   */
  const load = async (start: ConversationStart, pinned?: string | null) => {
    const content = pinned ? await artifacts(start.projectId, pinned) : null;
    const running = content ? { content, artifactVersion: pinned! } : await runningContent(deps.builder, start.projectId, start.environment);
    if (!running) throw new Error(`project ${start.projectId} has no content to run`);
    const variables = await deps.builder.realtimeConfigs.effective(start.projectId, start.environment as Environment);
    return { variables, projectId: start.projectId, accountId: start.accountId, ...running, ...derived(running.content) };
  };

  /**
   * What every turn derives from the content: the function sources as the sandbox takes them (name →
   * source, shared by hooks and tools) and the topics as the responder takes them. Built once per content
   * object: deployed artifacts come from the cache, so their turns share one (and the responder's retrieval
   * keeps its index of them); main's draft is read afresh every turn and so derived afresh.
   */
  const derivedOf = new WeakMap<Content, { sources: Record<string, string>; topics: KnowledgeTopic[] }>();
  const derived = (content: Content) => {
    let d = derivedOf.get(content);
    if (!d) {
      d = {
        sources: Object.fromEntries(Object.values(content.functions ?? {}).map((f) => [f.name, f.code])),
        topics: Object.freeze(Object.values(content.topics).map((t) => Object.freeze({ name: t.name, content: t.content }))) as KnowledgeTopic[],
      };
      derivedOf.set(content, d);
    }
    return d;
  };

  const conv = (id: string, start: ConversationStart, variant: ConvInput['variant'], w: Working, attributes: Record<string, unknown>, metadata: Record<string, unknown>, variables: Record<string, unknown>): ConvInput => ({
    conversation_id: id,
    channel: start.channel,
    environment: start.environment,
    variant,
    state: w.state,
    integration_attributes: attributes,
    metadata,
    sip_headers: start.sipHeaders ?? {},
    variables,
  });

  /**
   * One sandbox call in a `sandbox.invoke` span: the function, its project and conversation, and its
   * outcome (`ok` or the error kind: error, timeout, memory, not_found, compile, overloaded). `room`: the bytes of
   * transcript left for what the call says (a hook whose words are recorded; none for the others): a call whose
   * words (`recorded`) are more is a function error, like an output over its limit, and nothing it did applies.
   */
  const invoke = (request: Parameters<FunctionSandbox['invoke']>[0], room = Infinity) =>
    inSpan('sandbox.invoke', {
      kind: SpanKind.CLIENT,
      attributes: { 'function.name': request.name, 'project.id': request.project ?? '', 'conversation.id': request.conv.conversation_id },
    }, async (span) => {
      const called = await deps.sandbox.invoke(request);
      const r: InvokeResult =
        // A call that says nothing fits even where nothing is left (its state changes are not the transcript's).
        called.ok && room !== Infinity && Buffer.byteLength(recorded(request.name, called.conv.said, called.value).join(' '), 'utf8') > Math.max(0, room)
          ? { ok: false, error: { kind: 'error', message: transcriptFull }, conv: called.conv, durationMs: called.durationMs }
          : called;
      span.setAttribute('function.outcome', r.ok ? 'ok' : r.error.kind);
      if (!r.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: `${r.error.kind}: ${r.error.message}` });
      return r;
    });

  /** The functions of what a conversation runs, and the project they belong to (calls queue fairly per project). */
  type Runnable = { sources: Record<string, string>; projectId: string; accountId: string };

  /**
   * Runs a function if the artifact has it; its effects go into `w`. Returns what the transcript records of it
   * (`recorded`), which must fit in `room` bytes (`invoke`; the `end` hook's words are not recorded).
   */
  const hook = async ({ sources: functions, projectId: project, accountId: account }: Runnable, name: string, input: ConvInput, args: unknown[], w: Working, room = Infinity): Promise<string[] | null> => {
    if (!Object.hasOwn(functions, name)) return null;
    const r = await invoke({ functions, name, conv: input, args, timeoutMs: deps.functionTimeoutMs, project, account }, room);
    if (!r.ok) {
      w.functionErrors++;
      return null;
    }
    w.state = r.conv.state;
    if (r.conv.handoff) w.handoff = r.conv.handoff;
    if (r.conv.ended) w.end = true;
    const wait = waitOf(r.conv.awaiting ?? null);
    if (wait) w.awaiting = wait;
    if (r.conv.pii?.length) {
      const pii = (w.pii ??= []);
      for (const mark of r.conv.pii) pii.push(mark);
    }
    return recorded(name, r.conv.said, r.value);
  };

  const tools = ({ sources: functions, projectId: project, accountId: account }: Runnable, base: () => ConvInput, w: Working): ToolFunction[] =>
    Object.keys(functions)
      .filter((name) => !HOOKS.has(name))
      .map((name) => ({
        name,
        call: async (args: unknown) => {
          const r = await invoke({ functions, name, conv: { ...base(), state: w.state }, args: [args], timeoutMs: deps.functionTimeoutMs, project, account });
          if (!r.ok) {
            w.functionErrors++;
            return `error: ${r.error.message}`;
          }
          w.state = r.conv.state;
          if (r.conv.handoff) w.handoff = r.conv.handoff;
          if (r.conv.ended) w.end = true;
          const wait = waitOf(r.conv.awaiting ?? null);
          if (wait) w.awaiting = wait;
          return typeof r.value === 'string' ? r.value : JSON.stringify(r.value ?? null);
        },
      }));

  /** The responder's reply; when it fails (an unreachable or broken model server), the apology for its cause, marked `failed`. */
  const ask = (kind: 'greet' | 'respond', ctx: ResponderContext, message: string, conversationId: string): Promise<Answer> =>
    inSpan(`responder.${kind}`, { kind: SpanKind.CLIENT, attributes: { 'conversation.id': conversationId } }, async (span) => {
      try {
        const reply = kind === 'greet' ? await deps.responder.greet(ctx) : await deps.responder.respond(ctx, message);
        span.setAttribute('responder.outcome', 'ok');
        return reply;
      } catch (err) {
        span.setAttribute('responder.outcome', 'error');
        span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
        const failed = failureOf(err);
        span.setAttribute('responder.failure', failed);
        return { text: APOLOGY[failed], isOod: false, intents: [], entities: {}, handoff: null, end: false, failed };
      }
    });

  const turnRecord = (input: string, inputAt: number, reply: ResponderReply | null, text: string, metadata: Record<string, unknown>): TurnRecord => {
    const now = Date.now();
    return {
      user_input: input,
      user_input_dtmf: '',
      user_input_datetime: isoOf(inputAt),
      barge_in: false,
      agent_response: text,
      agent_response_datetime: isoOf(now),
      latency: Math.max(0, now - inputAt) / 1000,
      translated_user_input: '',
      english_agent_response: '',
      intents: reply?.intents ?? [],
      entities: reply?.entities ?? {},
      is_ood: reply?.isOod ?? false,
      is_silence: false,
      metadata,
    };
  };

  /**
   * One user message: the `turn` function may answer; else the responder does. `used`: what the transcript holds
   * before this turn, so that the function's answer fits beside the message in what is left.
   */
  const turn = async (
    id: string,
    start: ConversationStart,
    variant: ConvInput['variant'],
    loaded: Awaited<ReturnType<typeof load>>,
    w: Working,
    attributes: Record<string, unknown>,
    history: ResponderContext['history'],
    message: string,
    metadata: Record<string, unknown>,
    at: number,
    used: number,
  ): Promise<TurnRecord> => {
    const base = () => conv(id, start, variant, w, attributes, metadata, loaded.variables);
    const fn = await hook(loaded, 'turn', base(), [message], w, maxTranscript - used - transcriptBytes(message, '', metadata));
    const answered = fn?.length ? fn.join(' ') : null;
    w.failed = null;
    if (answered !== null) return turnRecord(message, at, null, answered, metadata);
    const reply = await ask('respond', {
      behavior: loaded.content.behavior,
      topics: loaded.topics,
      variables: loaded.variables,
      history,
      tools: tools(loaded, base, w),
      channel: start.channel,
      language: start.asrLangCode || undefined,
    }, message, id);
    w.failed = reply.failed ?? null;
    if (reply.handoff) w.handoff = w.handoff ?? reply.handoff;
    if (reply.end) w.end = true;
    return turnRecord(message, at, reply, reply.text, metadata);
  };

  /** `used`: what the transcript held before these turns; with them at the limit or past it, the conversation is full. */
  const outcome = (w: Working, turns: TurnRecord[], variant: ConvInput['variant'], artifactVersion: string | null, used: number): TurnOutcome => ({
    at: Date.now(),
    turns,
    response: turns.length ? turns[turns.length - 1].agent_response : '',
    state: w.state,
    handoff: w.handoff,
    end: w.end,
    oodTurns: turns.filter((t) => t.is_ood).length,
    functionErrors: w.functionErrors,
    variant,
    artifactVersion,
    awaiting: w.awaiting,
    ...(w.pii?.length ? { pii: w.pii } : {}),
    ...(w.failed ? { failed: w.failed } : {}),
    ...(turns.reduce((bytes, t) => bytes + turnBytes(t), used) >= maxTranscript ? { full: true } : {}),
  });

  /**
   * The variant a turn or a side run runs: the conversation's, unless this is a draft run that pins the artifact it
   * found deployed (its outcome's `artifactVersion`), whose variants may not hold it (`variantOnPin`).
   */
  const variantOf = (input: EndInput, loaded: Awaited<ReturnType<typeof load>>): ConvInput['variant'] =>
    input.artifactVersion === null && loaded.artifactVersion !== null ? variantOnPin(loaded.content, input.variant, input.start.variantId) : input.variant;

  /** Runs `external_event` or `bridge_ended`: its words become a turn of their own (no user input). */
  const side = async (input: SideInput, name: 'external_event' | 'bridge_ended', arg: unknown): Promise<SideOutcome> => {
    const w: Working = { state: { ...input.state }, functionErrors: 0, handoff: null, end: false, awaiting: null };
    const at = Date.now();
    let said: string[] = [];
    let artifactVersion: string | null = null;
    let variant = input.variant;
    const metadata = name === 'external_event' ? { external_event_id: (arg as { id: string }).id } : { bridge_ended: true };
    try {
      const loaded = await load(input.start, input.artifactVersion);
      artifactVersion = loaded.artifactVersion;
      variant = variantOf(input, loaded);
      const room = maxTranscript - input.transcriptBytes - transcriptBytes('', '', metadata);
      said = (await hook(loaded, name, conv(input.id, input.start, variant, w, input.integrationAttributes, {}, loaded.variables), [arg], w, room)) ?? [];
    } catch {
      // The project may be gone: nothing runs, the conversation goes on.
      w.functionErrors++;
    }
    return {
      at: Date.now(),
      turns: said.length ? [turnRecord('', at, null, said.join(' '), metadata)] : [],
      said,
      state: w.state,
      handoff: w.handoff,
      end: w.end,
      functionErrors: w.functionErrors,
      awaiting: w.awaiting,
      artifactVersion,
      variant,
    };
  };

  return {
    async start(input: StartInput): Promise<TurnOutcome> {
      const { start } = input;
      const loaded = await load(start);
      const variant = pickVariant(loaded.content, start.variantId);
      const w: Working = { state: { ...input.state }, functionErrors: 0, handoff: null, end: false, awaiting: null };
      const said = (await hook(loaded, 'start', conv(input.id, start, variant, w, start.integrationAttributes, {}, loaded.variables), [], w, maxTranscript)) ?? [];
      let greeting: Answer | null = null;
      if (!said.length) {
        greeting = await ask('greet', {
          behavior: loaded.content.behavior,
          topics: loaded.topics,
          variables: loaded.variables,
          history: [],
          tools: [],
          channel: start.channel,
      language: start.asrLangCode || undefined,
        }, '', input.id);
        w.failed = greeting.failed ?? null;
      }
      const turns = [turnRecord('', start.at, greeting, said.length ? said.join(' ') : greeting!.text, {})];
      if (start.initialMessage && !w.end && !w.handoff) {
        const history = [{ role: 'agent' as const, text: turns[0].agent_response }];
        turns.push(await turn(input.id, start, variant, loaded, w, start.integrationAttributes, history, start.initialMessage, {}, start.at, turnBytes(turns[0])));
      }
      return outcome(w, turns, variant, loaded.artifactVersion, 0);
    },

    async takeTurn(input: TurnInput): Promise<TurnOutcome> {
      const loaded = await load(input.start, input.artifactVersion);
      const variant = variantOf(input, loaded);
      const w: Working = { state: { ...input.state }, functionErrors: 0, handoff: null, end: false, awaiting: null };
      const record = await turn(input.id, input.start, variant, loaded, w, input.integrationAttributes, input.history, input.message || input.voice?.dtmf || '', input.metadata, input.at, input.transcriptBytes);
      return outcome(w, [withVoice(record, input.voice)], variant, loaded.artifactVersion, input.transcriptBytes);
    },

    /** The project's `external_event(conv, event)`, with the event (or the timed-out wait). */
    async external(input: SideInput): Promise<SideOutcome> {
      const e = input.external!;
      return side(input, 'external_event', { id: e.id, content_type: e.content_type, body: e.body, data: e.data, timed_out: e.timed_out, received_at: e.received_at });
    },

    /** The project's `bridge_ended(conv, bridge)`. */
    async bridge(input: SideInput): Promise<SideOutcome> {
      return side(input, 'bridge_ended', input.bridge);
    },

    /**
     * Pushes what an external event's function said to the conversation's webchat session, at once (as the
     * agent's message; the session ends too if the function ended the conversation). Other channels have no
     * live connection: false, and the text waits for the next turn's response. The ask's event id is fixed by
     * the machine, so a restarted effect is answered from the session's memory.
     */
    async deliver(input: DeliverInput): Promise<boolean> {
      if (input.channel !== 'WEBCHAT' || !deps.client || (input.text === '' && !input.end && !input.handoff)) return false;
      // Asking a session id that was never created would bring an empty session actor to life.
      if (deps.hasSession && !(await deps.hasSession(input.id))) return false;
      const client = await deps.client();
      const reply = await client.ask<{ ok: boolean }>('session', input.id, { type: 'AGENT_PUSH', text: input.text, end: input.end, handoff: input.handoff, at: Date.now() }, { eventId: input.askId });
      return reply?.ok === true;
    },

    async end(input: EndInput): Promise<{ at: number; state: Record<string, unknown>; functionErrors: number }> {
      const w: Working = { state: { ...input.state }, functionErrors: 0, handoff: null, end: true, awaiting: null };
      try {
        const loaded = await load(input.start, input.artifactVersion);
        await hook(loaded, 'end', conv(input.id, input.start, input.variant, w, input.integrationAttributes, {}, loaded.variables), [], w);
      } catch {
        // The project may be gone; the conversation still ends.
      }
      return { at: Date.now(), state: w.state, functionErrors: w.functionErrors };
    },
  };
}
