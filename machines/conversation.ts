import { assign, emit, enqueueActions, fromPromise, setup } from 'xstate';

/**
 * One conversation on any channel (chat, webchat, voice): started, then idle between turns, a turn in
 * progress, handed off, ended. Every side effect (running the deployment's functions, asking the responder)
 * is named here and provided by `actors/conversation` at run time: an invoked actor, except the turn's. The
 * turn, run on every message, is the host's effect (`ActorKind.effect`): while `responding` carries the tag
 * `turn`, the actor host runs it with `turnInput(context)` and sends its outcome back as `TURN_DONE`, as an
 * invoked promise's done event would come (a child actor created and stopped on every turn cost more than
 * the rest of the turn's transitions: bench/README.md, sixth session). An idle conversation
 * ends by itself: states tagged `expires` end at `IDLE_TIMEOUT` once `idleDeadline` has passed, an event the
 * actor host sends when that deadline comes (a deadline it keeps and stores, instead of a durable timer
 * invoked anew on every turn).
 *
 * External events (contract 4.8, 6.2): a function that calls `conv.await_external_event(id, {timeout_ms})`
 * puts the conversation in `waiting` (the awaited id and an absolute deadline in the context, a durable
 * `sleepUntil` on it, and `watchExternalEvent`, which registers the wait and picks up an event that arrived
 * early). The event (or the deadline) moves it to `externalResponding` (the project's `external_event`
 * function), then `delivering` (the said text pushed to a live channel; otherwise kept as `unread` and put
 * before the next turn's response, at most `MAX_UNREAD` texts and `MAX_UNREAD_CHARS` characters, the oldest
 * dropped first and marked `UNREAD_DROPPED`). Bridge-ended (4.9) runs `bridge_ended` once, in `bridging`, from any
 * settled state after the start, and records it in `bridgeEnded`. A wait renewed only by its own timeouts (no
 * message, no event between) is renewed at most `MAX_TIMEOUT_ROUNDS` times. While an `external_event` or
 * `bridge_ended` function runs or its words are delivered, a close, a message or a bridge notification is kept in
 * the context and taken once that is done (`routing`), as the host queues them behind a turn: none is dropped.
 *
 * What happened is emitted as domain events (`emit`), which the actor host commits with the snapshot as the
 * step's journal entry (DESIGN.md, "Journal"): `conversation.started`, `conversation.turn` (one per exchange:
 * the transcript lives in the journal, not in the snapshot), `conversation.changed` (the record's other
 * fields as they now stand), `conversation.answered` (what the client is answered) and `conversation.ended`.
 * The context keeps what the next turn needs: the last `RECENT_MESSAGES` messages (at most `MAX_RECENT_CHARS`) for the responder, the
 * conversation's variables and counters. States in which the conversation is still reacting to the last
 * event carry the tag `busy`.
 *
 * The transcript is bounded: `counts.transcriptBytes` counts what its turns hold (`turnBytes`), and the effects
 * keep it within the conversation's limit (`CONVERSATION_MAX_TRANSCRIPT_BYTES`): a function whose words would take
 * it past the limit is a function error, and a turn that leaves it at or past the limit ends the conversation
 * (`TurnOutcome.full`, end reason `full`). So are the integration attributes, which every message may add to: a
 * message that would take them past the bound (`CONVERSATION_MAX_ATTRIBUTES_BYTES`) is refused before anything of it
 * is taken (guard `attributesFit`).
 */

/** One exchange, as the conversation record (contract 2.5) stores it. */
export interface TurnRecord {
  user_input: string;
  user_input_dtmf: string;
  user_input_datetime: string;
  barge_in: boolean;
  agent_response: string;
  agent_response_datetime: string;
  /** Seconds from receiving the input to having the response. */
  latency: number;
  translated_user_input: string;
  english_agent_response: string;
  intents: string[];
  entities: Record<string, string>;
  is_ood: boolean;
  is_silence: boolean;
  /** The message's metadata, as the caller sent it. */
  metadata: Record<string, unknown>;
}

export interface Handoff {
  destination: string;
  reason: string;
}

/** What a client asked for when it started the conversation. */
export interface ConversationStart {
  accountId: string;
  projectId: string;
  environment: string;
  /** Analytics label: `CHAT`, `WEBCHAT`, `SMS`, `WHATSAPP`, `API`, `VOICE-SIP`. */
  channel: string;
  variantId: string | null;
  integrationAttributes: Record<string, unknown>;
  asrLangCode: string;
  ttsLangCode: string;
  initialMessage: string | null;
  fromNumber: string;
  toNumber: string;
  /** A call's SIP headers (`conv.sip_headers`): the INVITE's own, or an outbound call's metadata. */
  sipHeaders?: Record<string, string>;
  /** A call's sid (`IN-…` inbound, `OUT-…` outbound): the built-in state key `call_sid`. */
  callSid?: string;
  /** When the client's request arrived (ms since epoch). */
  at: number;
  /** An idle conversation ends this long after its last turn. */
  idleTimeoutMs: number;
}

/** How a caller's turn on a call came: digits keyed, speech over the agent (barge-in), or nothing said in time. */
export interface VoiceInput {
  dtmf?: string;
  bargeIn?: boolean;
  silence?: boolean;
}

/** The outcome of running the start effect or one turn. */
export interface TurnOutcome {
  /** When the effect finished (ms since epoch). */
  at: number;
  turns: TurnRecord[];
  /** The text answered to the client (the reply to the last input). */
  response: string;
  state: Record<string, unknown>;
  handoff: Handoff | null;
  end: boolean;
  oodTurns: number;
  functionErrors: number;
  variant: { id: string; name: string } | null;
  artifactVersion: string | null;
  /** Set when a function called `conv.await_external_event`: the id and the absolute deadline of the wait. */
  awaiting?: ExternalWait | null;
  /** Values the functions marked personal (`conv.mark_pii`): journaled, never kept in the snapshot. */
  pii?: string[];
  /**
   * The agent could not answer (its responder failed), and why: `response` is the platform's apology for that
   * cause. A client that can be told so apart (the Messaging API's error event) is; the turn is kept with the
   * apology as its answer.
   */
  failed?: ResponderFailure;
  /**
   * The transcript, with these turns, holds the conversation's limit of bytes or more (`CONVERSATION_MAX_TRANSCRIPT_BYTES`):
   * the conversation ends (end reason `full`), as if the agent had ended it, and the answer says so (`end`).
   */
  full?: boolean;
}

/**
 * Why a responder could not answer, as contract 7.4 tells causes apart: `respond`, the model server did not answer
 * (unreachable, an error status or error message, no answer in time); `stream`, its answer broke off (the stream
 * interrupted mid-reply) or was not valid data (not JSON, not a completion).
 */
export type ResponderFailure = 'respond' | 'stream';

/** An external event a conversation waits for: its id and when the wait times out (ms since epoch). */
export interface ExternalWait {
  eventId: string;
  deadline: number;
}

/** An external event as the `external_event` function receives it (`timed_out`: the wait's deadline passed). */
export interface ExternalEvent {
  id: string;
  content_type: string;
  body: string;
  data: unknown;
  timed_out: boolean;
  received_at: string | null;
}

/** What the telephony system reported when a bridged call ended (contract 4.9). */
export interface BridgeData {
  bridge_duration_seconds: number;
  call_duration_seconds: number;
}

/** What `bridge_ended` ran into, as the conversation's state shows it. */
export interface BridgeEnded extends BridgeData {
  at: string;
}

/** What an `external_event` or `bridge_ended` function did. */
export interface SideOutcome {
  at: number;
  /** Turns to add: one with what the function said, if it said anything. */
  turns: TurnRecord[];
  said: string[];
  state: Record<string, unknown>;
  handoff: Handoff | null;
  end: boolean;
  functionErrors: number;
  awaiting: ExternalWait | null;
  /**
   * The artifact the function ran, when it found one deployed to a conversation that had pinned none (a draft
   * run): pinned from then on, as a turn's is. Absent or null: nothing to pin.
   */
  artifactVersion?: string | null;
  /**
   * The variant the function ran: a draft run that pins an artifact goes on with this one (the artifact may not
   * hold the variant it started with, `variantOnPin`). Absent: the conversation's.
   */
  variant?: { id: string; name: string } | null;
}

/** The input of `deliverExternal`: what a live channel (a webchat session) is sent. */
export interface DeliverInput {
  id: string;
  channel: string;
  text: string;
  end: boolean;
  /** The handoff the function made (the live channel hands its user over too), or null. */
  handoff: Handoff | null;
  askId: string;
}

/** The answer to an ask, which the kind derives from the step's events and state (`actors/conversation/kind.ts`). */
export type Outcome =
  | { ok: true; response: string; end: boolean; handoff: Handoff | null; failed?: ResponderFailure }
  | { ok: false; error: 'not_started' | 'ended' | 'handed_off' | 'started' | 'attributes_too_large' };

/**
 * Keep this under 20 top-level fields (`test/machines.context-size.test.ts`): XState copies the context with
 * `Object.assign({}, context, update)` on every assign, and V8 makes an object built that way with 20 or more
 * properties a dictionary, which the next assign copies at more than ten times the cost.
 */
export interface ConversationContext {
  id: string;
  start: ConversationStart | null;
  variant: { id: string; name: string } | null;
  artifactVersion: string | null;
  endedAt: number | null;
  /** Conversation variables (`conv.state`), persisted across turns: from the start, the built-in keys (`builtinState`). */
  state: Record<string, unknown>;
  integrationAttributes: Record<string, unknown>;
  /** Speech recognition and synthesis languages (a call's; set by the start and by later messages). */
  langCodes: { asr: string; tts: string };
  /** The last `RECENT_MESSAGES` messages (user and agent), oldest first: the responder's history. */
  recent: HistoryMessage[];
  /**
   * Turns recorded so far (the turns themselves are `conversation.turn` journal events), those out of the
   * agent's domain, and the project functions that failed. `timeoutRounds`: the waits that timed out in a row
   * with no message or external event between; past `MAX_TIMEOUT_ROUNDS` a function's new wait is refused.
   * `transcriptBytes`: what the recorded turns hold (`turnBytes`), read through `transcriptBytesOf`.
   */
  counts: { turns: number; ood: number; functionErrors: number; timeoutRounds: number; transcriptBytes: number };
  handoff: Handoff | null;
  /**
   * The user message of the turn in progress; or one that came while an external event's or bridge's function
   * ran, taken as a turn once it is done (`routing`).
   */
  pending: { message: string; metadata: Record<string, unknown>; at: number; voice?: VoiceInput } | null;
  idleDeadline: number | null;
  endReason: 'closed' | 'agent' | 'idle' | 'full' | null;
  /** The external event the conversation waits for. */
  awaiting: ExternalWait | null;
  /** The external event being handled (or the timeout of the wait). */
  external: ExternalEvent | null;
  /** Ids of the external events already handled, newest last (a second delivery resumes nothing). */
  handledEvents: string[];
  /**
   * What external-event and bridge functions said that no client has seen yet (the next response starts with it):
   * at most `MAX_UNREAD` texts and `MAX_UNREAD_CHARS` characters, the oldest dropped first (`boundedUnread`).
   */
  unread: string[];
  bridge: {
    /** The bridge-ended notification being handled (or come while an external event's function ran), and when it arrived. */
    pending: (BridgeData & { at: number }) | null;
    /** Set once bridge_ended ran. */
    ended: BridgeEnded | null;
  };
}

export type ConversationEvent =
  | { type: 'START'; start: ConversationStart }
  | {
      type: 'MESSAGE';
      message: string;
      metadata: Record<string, unknown>;
      integrationAttributes: Record<string, unknown>;
      asrLangCode?: string;
      ttsLangCode?: string;
      /** Set by the media gateway on a call's turns. */
      voice?: VoiceInput;
      /**
       * The most bytes of JSON the conversation's integration attributes may hold once this message's are merged in
       * (`messageFits`): the Chat API's setting (`CONVERSATION_MAX_ATTRIBUTES_BYTES`). Unset: the default.
       */
      maxAttributesBytes?: number;
      at: number;
    }
  | { type: 'CLOSE'; at: number }
  /** The idle deadline passed (the actor host keeps it: `actors/conversation/kind.ts`); `at`: when it fired. */
  | { type: 'IDLE_TIMEOUT'; at: number }
  | { type: 'EXTERNAL_EVENT'; event: ExternalEvent }
  | { type: 'BRIDGE_ENDED'; bridge: BridgeData; at: number }
  /** The turn effect's outcome (the actor host runs it while `responding` is tagged `turn`). */
  | { type: 'TURN_DONE'; output: TurnOutcome };

/** One message of the responder's history. */
export interface HistoryMessage {
  role: 'user' | 'agent';
  text: string;
}

/**
 * How many messages of history the snapshot keeps for the responder (a user and an agent message per
 * exchange: the last ten exchanges). The snapshot's size then stays bounded however long the conversation;
 * the whole transcript is in the journal (`conversation.turn` events) and the conversation record.
 */
export const RECENT_MESSAGES = 20;

/**
 * The most characters the recent history holds: a message is up to what a function said (256 KiB), so twenty
 * of them would make every snapshot, commit and turn input megabytes. The newest messages are kept while they
 * fit; a message longer than the bound is cut to it, its start kept and ending `…`.
 */
export const MAX_RECENT_CHARS = 32 * 1024;

/** How many handled external event ids a conversation remembers. */
export const REMEMBERED_EXTERNAL_EVENTS = 32;

/**
 * The most texts `unread` keeps, and the most characters all of them hold (each text cut to it, with `…`). What
 * functions say while no client turn is pending waits in every snapshot until the next turn: without a bound, a
 * function that says something at every round of a self-renewing wait grew the snapshot, each commit and the
 * join at each delivery without end (an audit: 1 GB of store in 50 s, and with 200 KB per round no step could
 * commit). The oldest are dropped first; every word stays in the transcript (`conversation.turn`).
 */
export const MAX_UNREAD = 8;
export const MAX_UNREAD_CHARS = 16 * 1024;
/** Stands first in `unread`, and so in the next response, where older texts were dropped. */
export const UNREAD_DROPPED = '…';

/**
 * How many times in a row `external_event` may run for a timed-out wait with no user message and no external event
 * between: the wait it asks for at the last of them is refused (counted as a function error) and the conversation
 * goes idle, so a wait renews itself by its own timeouts at most this less one times. A timeout-only chain runs
 * with no client traffic, so no rate limit ever applies to it.
 */
export const MAX_TIMEOUT_ROUNDS = 10;

/**
 * The most bytes a conversation's transcript holds, by default (the setting `CONVERSATION_MAX_TRANSCRIPT_BYTES`):
 * a function says up to 256 KiB a call, and the turns are kept in the journal, the record and every read of it
 * (the Conversations API serializes the record whole), so without a bound one conversation of a hundred such
 * turns was a 26 MB record, and its read held up other accounts' turns on the edge. 8 MiB is thousands of pages of
 * text, far beyond any conversation a person has. What a function would say past it is a function error; the turn
 * that reaches it (a user's message, the responder's answer) is kept and ends the conversation, so a transcript
 * passes the limit by at most that one turn.
 */
export const CONVERSATION_MAX_TRANSCRIPT_BYTES = 8 * 1024 * 1024;

/**
 * What a turn of these texts adds to `counts.transcriptBytes`: the user's and the agent's text in bytes of UTF-8,
 * the keys a caller pressed (`dtmf`, a call's turn: `user_input_dtmf`, which holds them where `user_input` is then
 * empty), and the message's metadata as JSON when it has any (the client's, up to a request body a message). The texts
 * rather than the whole turn as JSON: `Buffer.byteLength` counts a text without encoding a copy, where the turn as
 * JSON would be one more serialization of up to 256 KiB a turn, and the turn's other fields are the platform's,
 * small and the same size every turn (timestamps, flags, the responder's intents), so they do not make one
 * conversation's record grow more than its number of turns does.
 */
export function transcriptBytes(userInput: string, agentResponse: string, metadata: Record<string, unknown>, dtmf = ''): number {
  let bytes = Buffer.byteLength(userInput, 'utf8') + Buffer.byteLength(agentResponse, 'utf8');
  if (dtmf) bytes += Buffer.byteLength(dtmf, 'utf8');
  for (const _ in metadata) {
    bytes += Buffer.byteLength(JSON.stringify(metadata), 'utf8');
    break;
  }
  return bytes;
}

/** What a recorded turn adds to `counts.transcriptBytes` (`transcriptBytes`). */
export const turnBytes = (t: TurnRecord): number => transcriptBytes(t.user_input, t.agent_response, t.metadata, t.user_input_dtmf);

/** The transcript's bytes so far; a snapshot from before the count has none and counts from 0. */
export const transcriptBytesOf = (c: ConversationContext): number => c.counts.transcriptBytes ?? 0;

/** The transcript's bytes once `turns` are recorded. */
const addedBytes = (c: ConversationContext, turns: TurnRecord[]): number => {
  let bytes = transcriptBytesOf(c);
  for (const t of turns) bytes += turnBytes(t);
  return bytes;
};

/**
 * The most bytes a conversation's integration attributes hold, by default (the setting
 * `CONVERSATION_MAX_ATTRIBUTES_BYTES`), measured as `attributesBytes`: a client's attributes are merged into the
 * conversation's on every message (`takeMessage`) and kept in every snapshot and the record, so without a bound a
 * client grew one conversation by a request body a turn, each step rewriting it all. 64 KiB is far more than the
 * labels and ids they carry; a Messaging API session's (`platform`, a user agent of 512 characters at most) is
 * under the setting's least value (4 KiB), and a call's are none.
 */
export const CONVERSATION_MAX_ATTRIBUTES_BYTES = 64 * 1024;

/** Integration attributes' size as their bound counts it: their JSON in bytes of UTF-8. */
export const attributesBytes = (attributes: Record<string, unknown>): number => Buffer.byteLength(JSON.stringify(attributes), 'utf8');

/**
 * Whether a message's integration attributes, merged into the conversation's (`current`, as `takeMessage` merges
 * them), stay within `limit` bytes (`attributesBytes`). A message that brings none changes nothing and fits: a
 * conversation whose attributes a higher setting let grow keeps them, and its messages without attributes go on.
 */
export function attributesFit(current: Record<string, unknown>, added: Record<string, unknown>, limit: number = CONVERSATION_MAX_ATTRIBUTES_BYTES): boolean {
  for (const _ in added) return attributesBytes({ ...current, ...added }) <= limit;
  return true;
}

/** What the start effect needs. */
export interface StartInput {
  id: string;
  start: ConversationStart;
  state: Record<string, unknown>;
}

/** What the end effect needs: the conversation as it stands. */
export interface EndInput {
  id: string;
  start: ConversationStart;
  /** What the transcript holds so far (`counts.transcriptBytes`): a function's words may fill only the rest. */
  transcriptBytes: number;
  /** The artifact the conversation started on: it runs that one to the end (null: main's draft). */
  artifactVersion: string | null;
  variant: { id: string; name: string } | null;
  state: Record<string, unknown>;
  integrationAttributes: Record<string, unknown>;
}

/** What `watchExternalEvent` needs: whose wait, for which id, until when. */
export interface WatchInput {
  id: string;
  projectId: string;
  wait: ExternalWait;
}

/** What the `external_event` and `bridge_ended` effects need. */
export interface SideInput extends EndInput {
  external?: ExternalEvent;
  bridge?: BridgeData;
}

/** What a turn effect needs: the conversation, its history and the new message. */
export interface TurnInput extends EndInput {
  history: HistoryMessage[];
  message: string;
  metadata: Record<string, unknown>;
  at: number;
  voice?: VoiceInput;
}

/** What the turn effect of a conversation `responding` (tagged `turn`) is run with. */
export function turnInput(context: ConversationContext): TurnInput {
  const pending = context.pending!;
  return {
    history: context.recent,
    message: pending.message,
    metadata: pending.metadata,
    at: pending.at,
    ...endInput(context),
    ...(pending.voice ? { voice: pending.voice } : {}),
  };
}

const notProvided = () => {
  throw new Error('provided by the actor host');
};

/** A history message's text within `MAX_RECENT_CHARS`. */
const recentText = (text: string) => (text.length > MAX_RECENT_CHARS ? `${text.slice(0, MAX_RECENT_CHARS - 1)}…` : text);

/** The recent history with `turns` added, cut to the last `RECENT_MESSAGES` messages and `MAX_RECENT_CHARS` characters. */
export const remember = (recent: HistoryMessage[], turns: TurnRecord[]): HistoryMessage[] => {
  if (turns.length === 0) return recent;
  const next = recent.slice();
  for (const t of turns) {
    if (t.user_input) next.push({ role: 'user', text: recentText(t.user_input) });
    if (t.agent_response) next.push({ role: 'agent', text: recentText(t.agent_response) });
  }
  let first = Math.max(0, next.length - RECENT_MESSAGES);
  let chars = 0;
  for (let i = next.length - 1; i >= first; i--) {
    chars += next[i].text.length;
    if (chars > MAX_RECENT_CHARS) {
      first = i + 1;
      break;
    }
  }
  return first > 0 ? next.slice(first) : next;
};

/**
 * `unread` with `said` added, within `MAX_UNREAD` texts and `MAX_UNREAD_CHARS` characters: a text longer than
 * the bound (less the marker's length) is cut to it, ending `…`; the oldest texts go first, and `UNREAD_DROPPED` then stands first (it
 * counts in both bounds). Only the new texts are measured against the rest: what was kept stays kept or goes.
 */
export function boundedUnread(unread: string[], said: string[]): string[] {
  if (said.length === 0) return unread;
  // One text always fits beside the marker.
  const longest = MAX_UNREAD_CHARS - UNREAD_DROPPED.length;
  const all = unread.slice();
  for (const text of said) all.push(text.length > longest ? `${text.slice(0, longest - 1)}…` : text);
  let chars = 0;
  for (const text of all) chars += text.length;
  if (all.length <= MAX_UNREAD && chars <= MAX_UNREAD_CHARS) return all;
  // Newest first, while the marker still fits beside what is kept.
  let first = all.length;
  let kept = UNREAD_DROPPED.length;
  while (first > 0 && all.length - first + 1 < MAX_UNREAD && kept + all[first - 1].length <= MAX_UNREAD_CHARS) kept += all[--first].length;
  const rest = all.slice(first);
  if (rest[0] === UNREAD_DROPPED) return rest;
  rest.unshift(UNREAD_DROPPED);
  return rest;
}

/**
 * The built-in state keys (contract 2.5) a conversation starts with: the caller's number (`from_`), the number
 * called (`to`), the conversation's id, and a call's sid (`call_sid`, voice only). Chats have empty numbers. They
 * are ordinary variables from the start on: every function reads them in `conv.state` and may change or delete
 * them, as the hosted platform allows, and the record shows the state as it then is (docs/chat.md).
 */
export const builtinState = (id: string, start: ConversationStart): Record<string, unknown> => ({
  from_: start.fromNumber,
  to: start.toNumber,
  conversation_id: id,
  ...(start.callSid ? { call_sid: start.callSid } : {}),
});

/** Every domain event names its account and project (the journal contract). */
const owner = (c: ConversationContext) => ({ account_id: c.start?.accountId ?? '', project_id: c.start?.projectId ?? '' });

/** `conversation.started`: who, where, when. */
export interface StartedData {
  account_id: string;
  project_id: string;
  channel: string;
  environment: string;
  variant_id: string | null;
  from_number: string;
  to_number: string;
  /** A voice call's sid (the built-in state key `call_sid`); absent on other channels. */
  call_sid?: string;
  /** ISO 8601. */
  started_at: string;
  /** The state the conversation starts with: its built-in keys (`builtinState`). */
  state: Record<string, unknown>;
}

/** `conversation.turn`: one exchange, with its latency and the function errors of the step that recorded it. */
export interface TurnData {
  account_id: string;
  project_id: string;
  channel: string;
  turn: TurnRecord;
  latency_ms: number;
  function_errors: number;
}

/** `conversation.changed`: the record's fields other than turns, as they stand after the step. */
export interface ChangedData {
  account_id: string;
  project_id: string;
  /** The conversation's variables (`conv.state`). */
  state: Record<string, unknown>;
  variant_id: string;
  variant_name: string;
  artifact_version: string;
  handoff: Handoff | null;
  num_ood: number;
  function_errors: number;
  integration_attributes: Record<string, unknown>;
  asr_lang_code: string;
  tts_lang_code: string;
  end_reason: string;
  awaiting_external_event: { event_id: string; deadline: string } | null;
  bridge_ended: BridgeEnded | null;
}

/** `conversation.answered`: what the client that sent the event is answered. */
export interface AnsweredData {
  account_id: string;
  project_id: string;
  response: string;
  end: boolean;
  handoff: Handoff | null;
  /** The agent could not answer, and why: `response` is the platform's apology (`TurnOutcome.failed`). */
  failed?: ResponderFailure;
}

/** `conversation.ended`. */
export interface EndedData {
  account_id: string;
  project_id: string;
  channel: string;
  /** ISO 8601. */
  ended_at: string;
  reason: string;
  /** Ended by a failure of ours (the machine itself never is: failures end conversations elsewhere). */
  crashed: boolean;
}

/** The events a conversation emits (`{type, data}`, as the journal stores them). */
export type ConversationDomainEvent =
  | { type: 'conversation.started'; data: StartedData }
  | { type: 'conversation.turn'; data: TurnData }
  | { type: 'conversation.changed'; data: ChangedData }
  | { type: 'conversation.answered'; data: AnsweredData }
  | { type: 'conversation.ended'; data: EndedData }
  | { type: 'conversation.pii_marked'; data: PiiMarkedData };

/** `conversation.pii_marked`: values a function marked personal (`conv.mark_pii`), for redaction only. */
export interface PiiMarkedData {
  account_id: string;
  project_id: string;
  values: string[];
}

const changedOf = (c: ConversationContext): ConversationDomainEvent => ({
  type: 'conversation.changed',
  // Owner last: a literal that adds properties after a spread is slow in V8 (test/lint.spread.test.ts).
  data: {
    state: c.state,
    variant_id: c.variant?.id ?? '',
    variant_name: c.variant?.name ?? '',
    artifact_version: c.artifactVersion ?? '',
    handoff: c.handoff,
    num_ood: c.counts.ood,
    function_errors: c.counts.functionErrors,
    integration_attributes: c.integrationAttributes,
    asr_lang_code: c.langCodes.asr,
    tts_lang_code: c.langCodes.tts,
    end_reason: c.endReason ?? '',
    awaiting_external_event: c.awaiting ? { event_id: c.awaiting.eventId, deadline: new Date(c.awaiting.deadline).toISOString() } : null,
    bridge_ended: c.bridge.ended,
    ...owner(c),
  },
});

const turnsOf = (c: ConversationContext, turns: TurnRecord[], functionErrors: number): ConversationDomainEvent[] =>
  turns.map((turn, i) => ({
    type: 'conversation.turn',
    // The step's function errors are counted once, on its first turn.
    data: { channel: c.start!.channel, turn, latency_ms: Math.round(turn.latency * 1000), function_errors: i === 0 ? functionErrors : 0, ...owner(c) },
  }));

const endInput = (c: ConversationContext): EndInput => ({
  id: c.id,
  start: c.start!,
  transcriptBytes: transcriptBytesOf(c),
  artifactVersion: c.artifactVersion,
  variant: c.variant,
  state: c.state,
  integrationAttributes: c.integrationAttributes,
});

/**
 * Where a conversation goes once an external event or a bridge notification was handled: first to what came
 * meanwhile (`sideEvents`): a bridge notification, then a close (`ending`), then a message (a turn, unless the
 * conversation ended or was handed off meanwhile: the message is then refused as it would have been).
 */
const resume = [
  { guard: ({ context }: { context: ConversationContext }) => context.bridge.pending !== null, target: 'bridging' },
  { guard: ({ context }: { context: ConversationContext }) => context.endedAt !== null, target: 'ended', actions: 'dropPending' },
  { guard: ({ context }: { context: ConversationContext }) => context.endReason !== null, target: 'ending', actions: 'dropPending' },
  { guard: ({ context }: { context: ConversationContext }) => context.handoff !== null, target: 'handedOff', actions: 'dropPending' },
  { guard: ({ context }: { context: ConversationContext }) => context.pending !== null, target: 'responding' },
  { guard: ({ context }: { context: ConversationContext }) => context.awaiting !== null, target: 'waiting' },
  { target: 'idle' },
] as const;

/**
 * A message's integration attributes, merged into the conversation's, stay within the bound the message carries
 * (`maxAttributesBytes`, the edge's `CONVERSATION_MAX_ATTRIBUTES_BYTES`; without it, the default): a message that would
 * take them past it is refused whole, the conversation left as it was, its turn not taken (the actor's reply says
 * why: `attributes_too_large`, `actors/conversation/kind.ts`).
 */
export const messageFits = ({ context, event }: { context: Pick<ConversationContext, 'integrationAttributes'>; event: ConversationEvent }): boolean =>
  event.type !== 'MESSAGE' || attributesFit(context.integrationAttributes, event.integrationAttributes, event.maxAttributesBytes);

/** The conversation is neither ended, ending nor handed off: a message may start a turn. */
const live = ({ context }: { context: ConversationContext }) => context.endedAt === null && context.endReason === null && context.handoff === null;

/**
 * What a client or an outside system may send while an external event's or a bridge's function runs or its words
 * are delivered (`externalResponding`, `delivering`, `bridging`): a step the host may be running on a timer (the
 * wait's deadline), not on an event, so these are not queued behind it as they are behind a turn. Each is kept in
 * the context and taken by `routing` once the function is done; the asker is answered then (the kind is settled
 * only outside `busy` states). An `EXTERNAL_EVENT` needs nothing here: the webhook stored it first, and a wait the
 * function starts for its id finds it in `waiting.checking`.
 */
const sideEvents = {
  // A close of a conversation already ending (or ended: `bridging` runs after the end too) changes nothing.
  CLOSE: { guard: ({ context }: { context: ConversationContext }) => context.endedAt === null && context.endReason === null, actions: 'closeLater' },
  MESSAGE: { guard: (args: { context: ConversationContext; event: ConversationEvent }) => live(args) && messageFits(args), actions: 'takeMessage' },
} as const;
/** Also a bridge notification while an external event's function runs (`bridging` itself has one in hand). */
const externalSideEvents = {
  BRIDGE_ENDED: { guard: ({ context }: { context: ConversationContext }) => context.bridge.ended === null && context.bridge.pending === null, actions: 'takeBridge' },
  CLOSE: sideEvents.CLOSE,
  MESSAGE: sideEvents.MESSAGE,
} as const;

/** The bridge completion as the state records it: the durations, and when the notification arrived. */
const bridgeRecord = (b: BridgeData & { at: number }): BridgeEnded => ({
  bridge_duration_seconds: b.bridge_duration_seconds,
  call_duration_seconds: b.call_duration_seconds,
  at: new Date(b.at).toISOString(),
});

const timedOut = (eventId: string): ExternalEvent => ({ id: eventId, content_type: '', body: '', data: null, timed_out: true, received_at: null });

const handled = (c: ConversationContext, eventId: string) => [...c.handledEvents, eventId].slice(-REMEMBERED_EXTERNAL_EVENTS);

/** An external event came: a chain of timed-out waits starts again from none. */
const eventCame = (c: ConversationContext) => ({ ...c.counts, timeoutRounds: 0 });

/** After the start effect or a turn: to ending, handed off or idle, with the outcome applied. */
const outputOf = ({ event }: { event: { output: TurnOutcome } }) => event.output;
/** Applies an outcome and emits its events in one action (one context update per turn, see `settleOutcome`). */
const outcomeActions = [{ type: 'settleOutcome', params: outputOf }] as const;
const afterOutcome = [
  { guard: { type: 'ends', params: outputOf }, target: 'ending', actions: outcomeActions },
  { guard: { type: 'handsOff', params: outputOf }, target: 'handedOff', actions: outcomeActions },
  { guard: { type: 'awaits', params: outputOf }, target: 'waiting', actions: outcomeActions },
  { target: 'idle', actions: outcomeActions },
] as const;

export const conversationMachine = setup({
  types: {} as { context: ConversationContext; events: ConversationEvent; input: { id: string }; emitted: ConversationDomainEvent },
  actors: {
    startConversation: fromPromise<TurnOutcome, StartInput>(notProvided),
    endConversation: fromPromise<{ at: number; state: Record<string, unknown>; functionErrors: number }, EndInput>(notProvided),
    sleepUntil: fromPromise<number, { until: number }>(notProvided),
    watchExternalEvent: fromPromise<ExternalEvent | null, WatchInput>(notProvided),
    handleExternalEvent: fromPromise<SideOutcome, SideInput>(notProvided),
    deliverExternal: fromPromise<boolean, DeliverInput>(notProvided),
    handleBridgeEnded: fromPromise<SideOutcome, SideInput>(notProvided),
  },
  actions: {
    /** A user message starts a turn (from `idle`, or while `waiting` for an external event). */
    takeMessage: assign(({ context, event }) => {
      if (event.type !== 'MESSAGE') return {};
      return {
        pending: { message: event.message, metadata: event.metadata, at: event.at, ...(event.voice ? { voice: event.voice } : {}) },
        // Later turns may add integration attributes; earlier ones stay.
        integrationAttributes: { ...context.integrationAttributes, ...event.integrationAttributes },
        langCodes: event.asrLangCode === undefined && event.ttsLangCode === undefined ? context.langCodes : { asr: event.asrLangCode ?? context.langCodes.asr, tts: event.ttsLangCode ?? context.langCodes.tts },
      };
    }),
    /** A close while a function runs: the conversation ends once it is done (`resume`); no wait outlives it. */
    closeLater: assign({ endReason: 'closed' as const, awaiting: null }),
    /** A bridge notification, run by `bridging` (at once, or once an external event's function is done). */
    takeBridge: assign(({ context, event }) => (event.type === 'BRIDGE_ENDED' ? { bridge: { pending: { at: event.at, ...event.bridge }, ended: context.bridge.ended } } : {})),
    /** A message kept while a function ran, refused after all (the conversation ended or was handed off). */
    dropPending: enqueueActions(({ context, enqueue }) => {
      if (context.pending !== null) enqueue.assign({ pending: null });
    }),
    /**
     * A turn's (or the start's) outcome: the context it leaves, and its events (its turns, the changed
     * fields, and the answer, which starts with what external events said meanwhile; those words are then
     * read). One action with one assign: every context update copies the whole context.
     */
    settleOutcome: enqueueActions(({ context, enqueue }, out: TurnOutcome) => {
      const update = {
        awaiting: out.awaiting ?? (out.handoff || out.end ? null : context.awaiting),
        recent: remember(context.recent, out.turns),
        // A turn is a client's message: a chain of timed-out waits starts again from none.
        counts: {
          turns: context.counts.turns + out.turns.length,
          ood: context.counts.ood + out.oodTurns,
          functionErrors: context.counts.functionErrors + out.functionErrors,
          timeoutRounds: 0,
          transcriptBytes: addedBytes(context, out.turns),
        },
        state: out.state,
        handoff: out.handoff ?? context.handoff,
        // The outcome that pins an artifact (the start's, or a draft run's) says the variant run on it, none too.
        variant: context.artifactVersion === null && out.artifactVersion !== null ? out.variant : (out.variant ?? context.variant),
        artifactVersion: out.artifactVersion ?? context.artifactVersion,
        pending: null,
        idleDeadline: out.at + context.start!.idleTimeoutMs,
        endReason: out.end ? ('agent' as const) : out.full ? ('full' as const) : context.endReason,
        unread: [] as string[],
      };
      const next: ConversationContext = { ...context, ...update };
      enqueue.assign(update);
      for (const e of turnsOf(next, out.turns, out.functionErrors)) enqueue.emit(e);
      // Journal only: the recordings projector mutes them, the Conversations API masks them for keys without `pii`.
      if (out.pii?.length) enqueue.emit({ type: 'conversation.pii_marked', data: { values: out.pii, ...owner(next) } });
      enqueue.emit(changedOf(next));
      const response = [...context.unread, out.response].filter((x) => x !== '').join(' ');
      enqueue.emit({ type: 'conversation.answered', data: { response, end: out.end || out.full === true, handoff: out.handoff, ...owner(next), ...(out.failed ? { failed: out.failed } : {}) } });
    }),
    /** What an external_event or bridge_ended function recorded. */
    emitSide: enqueueActions(({ context, enqueue }, out: SideOutcome) => {
      for (const e of turnsOf(context, out.turns, out.functionErrors)) enqueue.emit(e);
    }),
    emitChanged: emit(({ context }) => changedOf(context)),
    /**
     * What an external_event or bridge_ended function did; its words wait in `unread` (bounded: `boundedUnread`)
     * until delivered. A wait asked for after `MAX_TIMEOUT_ROUNDS` timeouts in a row is refused, a function error.
     */
    applySide: assign(({ context }, out: SideOutcome) => {
      const refused = out.awaiting !== null && context.external?.timed_out === true && context.counts.timeoutRounds >= MAX_TIMEOUT_ROUNDS;
      return {
        recent: remember(context.recent, out.turns),
        counts: {
          ...context.counts,
          turns: context.counts.turns + out.turns.length,
          functionErrors: context.counts.functionErrors + out.functionErrors + (refused ? 1 : 0),
          transcriptBytes: addedBytes(context, out.turns),
        },
        state: out.state,
        unread: boundedUnread(context.unread, out.said),
        // Only a draft run pins here, with the variant it ran: a pinned conversation keeps what it runs.
        artifactVersion: context.artifactVersion ?? out.artifactVersion ?? null,
        variant: context.artifactVersion === null && out.artifactVersion && out.variant !== undefined ? out.variant : context.variant,
        // A conversation that has ended stays as it ended.
        ...(context.endedAt !== null
          ? {}
          : {
              handoff: out.handoff ?? context.handoff,
              // A new wait replaces the old; bridge_ended leaves a wait in progress alone (an external event's was
              // consumed); a conversation that ends (a close came meanwhile, `closeLater`) keeps none.
              awaiting: out.end || out.handoff || context.endReason !== null ? null : ((refused ? null : out.awaiting) ?? context.awaiting ?? null),
              // A close that came first stays the reason.
              endReason: context.endReason ?? (out.end ? ('agent' as const) : null),
              idleDeadline: out.at + context.start!.idleTimeoutMs,
            }),
      };
    }),
  },
  guards: {
    /** A message's integration attributes fit beside the conversation's (`messageFits`). */
    attributesFit: ({ context, event }) => messageFits({ context, event }),
    /** The agent ended the conversation, or the transcript is full. */
    ends: (_, out: TurnOutcome) => out.end || out.full === true,
    handsOff: (_, out: TurnOutcome) => out.handoff !== null,
    awaits: ({ context }, out: TurnOutcome) => (out.awaiting ?? context.awaiting ?? null) !== null,
    /** The idle deadline has passed by the time the timeout is handled (a turn since moved it on). */
    idleDeadlinePassed: ({ context, event }) => event.type === 'IDLE_TIMEOUT' && context.idleDeadline !== null && event.at >= context.idleDeadline,
    /** An external event for the awaited id that was not handled before. */
    awaited: ({ context, event }) =>
      event.type === 'EXTERNAL_EVENT' && context.awaiting?.eventId === event.event.id && !context.handledEvents.includes(event.event.id),
  },
}).createMachine({
  id: 'conversation',
  context: ({ input }) => ({
    id: input.id,
    start: null,
    variant: null,
    artifactVersion: null,
    endedAt: null,
    state: {},
    integrationAttributes: {},
    langCodes: { asr: '', tts: '' },
    recent: [],
    counts: { turns: 0, ood: 0, functionErrors: 0, timeoutRounds: 0, transcriptBytes: 0 },
    handoff: null,
    pending: null,
    idleDeadline: null,
    endReason: null,
    awaiting: null,
    external: null,
    handledEvents: [],
    unread: [],
    bridge: { pending: null, ended: null },
  }),
  initial: 'new',
  states: {
    new: {
      on: {
        START: {
          target: 'starting',
          actions: [
            assign(({ context, event }) => ({
              start: event.start,
              state: builtinState(context.id, event.start),
              integrationAttributes: event.start.integrationAttributes,
              langCodes: { asr: event.start.asrLangCode, tts: event.start.ttsLangCode },
            })),
            emit(({ context }) => ({
              type: 'conversation.started' as const,
              data: {
                channel: context.start!.channel,
                environment: context.start!.environment,
                variant_id: context.start!.variantId,
                from_number: context.start!.fromNumber,
                to_number: context.start!.toNumber,
                started_at: new Date(context.start!.at).toISOString(),
                state: context.state,
                ...owner(context),
                ...(context.start!.callSid ? { call_sid: context.start!.callSid } : {}),
              } satisfies StartedData,
            })),
          ],
        },
        // A message, close or bridge notification before the start changes nothing (the reply says not started).
      },
    },
    starting: {
      tags: ['busy'],
      invoke: {
        id: 'start',
        src: 'startConversation',
        input: ({ context }) => ({ id: context.id, start: context.start!, state: context.state }),
        onDone: afterOutcome,
      },
    },
    idle: {
      tags: ['expires'],
      on: {
        IDLE_TIMEOUT: { guard: 'idleDeadlinePassed', target: 'ending', actions: assign({ endReason: 'idle' }) },
        MESSAGE: {
          guard: 'attributesFit',
          target: 'responding',
          actions: 'takeMessage',
        },
        CLOSE: { target: 'ending', actions: assign({ endReason: 'closed' }) },
        BRIDGE_ENDED: [
          { guard: ({ context }) => context.bridge.ended !== null },
          { target: 'bridging', actions: assign(({ event }) => ({ bridge: { pending: { at: event.at, ...event.bridge }, ended: null } })) },
        ],
      },
    },
    /** A function awaits an external event: until it arrives (early ones are picked up here) or the deadline passes. */
    waiting: {
      invoke: {
        id: 'externalTimer',
        src: 'sleepUntil',
        input: ({ context }) => ({ until: context.awaiting!.deadline }),
        onDone: {
          target: 'externalResponding',
          // Not a handled event: an event of this id that comes later was not awaited any more and resumes nothing.
          actions: assign(({ context }) => ({
            external: timedOut(context.awaiting!.eventId),
            awaiting: null,
            counts: { ...context.counts, timeoutRounds: context.counts.timeoutRounds + 1 },
          })),
        },
      },
      initial: 'checking',
      states: {
        /**
         * Registers the wait and looks for an event that came before it, within the step that started the wait
         * (`busy`): the client's next message finds an early event handled, its words in that answer.
         */
        checking: {
          tags: ['busy'],
          invoke: {
            id: 'externalWatch',
            src: 'watchExternalEvent',
            input: ({ context }) => ({ id: context.id, projectId: context.start!.projectId, wait: context.awaiting! }),
            onDone: [
              {
                guard: ({ context, event }) => event.output !== null && !context.handledEvents.includes(event.output.id),
                target: '#conversation.externalResponding',
                actions: assign(({ context, event }) => ({ external: event.output, handledEvents: handled(context, event.output!.id), awaiting: null, counts: eventCame(context) })),
              },
              { target: 'listening' },
            ],
            // The wait stands all the same: the webhook finds it, or its deadline passes.
            onError: 'listening',
          },
        },
        /** Until the webhook brings the event (`EXTERNAL_EVENT`) or the deadline passes. */
        listening: {},
      },
      on: {
        MESSAGE: {
          guard: 'attributesFit',
          target: 'responding',
          actions: 'takeMessage',
        },
        EXTERNAL_EVENT: {
          guard: 'awaited',
          target: 'externalResponding',
          actions: assign(({ context, event }) => ({ external: event.event, handledEvents: handled(context, event.event.id), awaiting: null, counts: eventCame(context) })),
        },
        CLOSE: { target: 'ending', actions: assign({ awaiting: null, endReason: 'closed' }) },
        BRIDGE_ENDED: [
          { guard: ({ context }) => context.bridge.ended !== null },
          { target: 'bridging', actions: assign(({ event }) => ({ bridge: { pending: { at: event.at, ...event.bridge }, ended: null } })) },
        ],
      },
    },
    externalResponding: {
      tags: ['busy'],
      on: externalSideEvents,
      invoke: {
        id: 'external',
        src: 'handleExternalEvent',
        input: ({ context }) => ({ external: context.external!, ...endInput(context) }),
        onDone: {
          target: 'delivering',
          actions: [{ type: 'applySide', params: ({ event }) => event.output }, { type: 'emitSide', params: ({ event }) => event.output }, assign({ external: null }), 'emitChanged'],
        },
        onError: { target: 'delivering', actions: [assign({ external: null }), 'emitChanged'] },
      },
    },
    /** Pushes what the function said to a live channel (webchat); otherwise it waits for the next turn. */
    delivering: {
      tags: ['busy'],
      on: externalSideEvents,
      invoke: {
        id: 'deliver',
        src: 'deliverExternal',
        input: ({ context }) => ({
          id: context.id,
          channel: context.start!.channel,
          text: context.unread.join(' '),
          end: context.endReason === 'agent',
          handoff: context.handoff,
          askId: `${context.id}:external:${context.handledEvents.length}:${context.counts.turns}`,
        }),
        onDone: [
          { guard: ({ event }) => event.output, target: 'routing', actions: assign({ unread: [] }) },
          { target: 'routing' },
        ],
        onError: 'routing',
      },
    },
    /** Decides where the conversation goes after an external event or a bridge notification. */
    routing: { tags: ['busy'], always: resume },
    bridging: {
      tags: ['busy'],
      on: sideEvents,
      invoke: {
        id: 'bridge',
        src: 'handleBridgeEnded',
        input: ({ context }) => ({ bridge: { bridge_duration_seconds: context.bridge.pending!.bridge_duration_seconds, call_duration_seconds: context.bridge.pending!.call_duration_seconds }, ...endInput(context) }),
        onDone: {
          target: 'routing',
          actions: [
            { type: 'applySide', params: ({ event }) => event.output },
            { type: 'emitSide', params: ({ event }) => event.output },
            assign(({ context }) => ({ bridge: { pending: null, ended: bridgeRecord(context.bridge.pending!) } })),
            'emitChanged',
          ],
        },
        onError: { target: 'routing', actions: [assign(({ context }) => ({ bridge: { pending: null, ended: bridgeRecord(context.bridge.pending!) } })), 'emitChanged'] },
      },
    },
    /** The turn effect runs (the host's, see above) until its outcome comes back. */
    responding: {
      tags: ['busy', 'turn'],
      // For the chart (`gateway/edge/inspector`): what the host runs here.
      meta: { hostEffect: 'takeTurn' },
      on: { TURN_DONE: afterOutcome },
    },
    handedOff: {
      // Nobody may come back to a handed-off conversation: it also ends once idle.
      tags: ['expires'],
      on: {
        IDLE_TIMEOUT: { guard: 'idleDeadlinePassed', target: 'ending', actions: assign({ endReason: 'idle' }) },
        CLOSE: { target: 'ending', actions: assign({ endReason: 'closed' }) },
        BRIDGE_ENDED: [
          { guard: ({ context }) => context.bridge.ended !== null },
          { target: 'bridging', actions: assign(({ event }) => ({ bridge: { pending: { at: event.at, ...event.bridge }, ended: null } })) },
        ],
      },
    },
    ending: {
      tags: ['busy'],
      invoke: {
        id: 'end',
        src: 'endConversation',
        input: ({ context }) => endInput(context),
        onDone: {
          target: 'ended',
          actions: [
            assign(({ context, event }) => ({
              endedAt: event.output.at,
              state: event.output.state,
              counts: { ...context.counts, functionErrors: context.counts.functionErrors + event.output.functionErrors },
              idleDeadline: null,
            })),
            'emitChanged',
            emit(({ context }) => ({
              type: 'conversation.ended' as const,
              data: {
                channel: context.start!.channel,
                ended_at: new Date(context.endedAt!).toISOString(),
                reason: context.endReason ?? 'closed',
                crashed: false,
                ...owner(context),
              } satisfies EndedData,
            })),
          ],
        },
      },
    },
    ended: {
      on: {
        BRIDGE_ENDED: [
          { guard: ({ context }) => context.bridge.ended !== null },
          { target: 'bridging', actions: assign(({ event }) => ({ bridge: { pending: { at: event.at, ...event.bridge }, ended: null } })) },
        ],
      },
    },
  },
});

