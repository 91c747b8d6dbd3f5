/**
 * The offline responder: deterministic, no network. It greets from the behavior, ends on goodbye, hands off
 * when the user asks for a person, answers greetings, thanks and small talk (smalltalk.ts), and otherwise
 * answers with the knowledge-base topics that match the message (BM25, see retrieval.ts: the best topic,
 * joined by others that answer parts of the question it does not), or with an out-of-domain fallback.
 * Its wording follows the channel: a phone call is "calling", a chat is "chatting".
 *
 * Options, read from the real-time `variables` at each turn (all optional):
 * - `greeting` (string): the opening line.
 * - `goodbye` (string): the closing line when the user says goodbye (default by channel).
 * - `fallback` (string): the out-of-domain reply.
 * - `handoff_destination`, `handoff_reason` (strings): the handoff target and reason (defaults `live_agent`,
 *   `user_requested`); `handoff_message` (string): what the agent says when handing off (default by channel).
 * - `min_score` (number): the BM25 score a topic must exceed to be used as the answer (default 0: any
 *   shared non-stop-word term answers; raise it to demand more overlap).
 */
import { rankTopics, type RankedTopic } from './retrieval.js';
import { isVoiceChannel, smallTalk, smallTalkReply } from './smalltalk.js';
import type { KnowledgeTopic, Responder, ResponderContext, ResponderReply } from './types.js';

export const DEFAULT_GREETING = 'Hello! How can I help you today?';
/** The goodbye on text channels (chat, webchat, SMS, WhatsApp, API). */
export const DEFAULT_GOODBYE = 'Thanks for chatting with us. Goodbye!';
/** The goodbye on a phone call. */
export const DEFAULT_VOICE_GOODBYE = 'Thank you for calling. Goodbye!';
export const DEFAULT_FALLBACK = "Sorry, I can't help with that. Could you ask me something else?";
/** The prompt on text channels when a turn brings no words (an empty message). */
export const DEFAULT_NO_INPUT = "Sorry, I didn't get a message. What can I help you with?";
/** The prompt on a phone call when a turn brings no words (the caller's silence, or speech nothing was recognised in). */
export const DEFAULT_VOICE_NO_INPUT = "Sorry, I didn't catch that. Are you still there?";
/** The handoff line on text channels. */
export const DEFAULT_HANDOFF_MESSAGE = 'Let me connect you with someone who can help.';
/** The handoff line on a phone call. */
export const DEFAULT_VOICE_HANDOFF_MESSAGE = 'Let me transfer you to someone who can help.';
/** At most this many topics answer one message. */
export const MAX_COMBINED_TOPICS = 3;
/**
 * Terms too generic to tie a part of a question to a topic on their own ("do you *take* cards" is not about
 * "take-home kits"): a clause whose best topic shares only these does not add that topic to the answer.
 */
const WEAK_TERMS: ReadonlySet<string> = new Set(['take', 'get', 'need', 'want', 'have', 'make', 'know', 'like', 'tell', 'help', 'give', 'go', 'come', 'use', 'look', 'find', 'ask', 'thing', 'way', 'much', 'mani', 'also', 'time', 'dai', 'todai', 'bring', 'put', 'keep', 'try', 'let', 'see', 'sai']);
/** Where a message divides into parts that may ask about different things. */
const CLAUSE_BREAK = /[,;:?!.]+|\b(?:and|also|plus|or|but)\b/i;

const GOODBYE = /\b(?:good\s*bye|bye(?:\s*bye)?|that'?s all|that is all|that'?s it|nothing else|no,? thanks?(?: you)?|thanks,?\s+bye|see you(?: later)?)\b/i;

const PERSON = String.raw`(?:a |an |the |some |your |a real |a live )?(?:human(?: being)?|person|agent|representative|rep|someone|somebody|operator|real person|live agent|manager|supervisor|receptionist|staff member|member of staff|employee)`;
/** A request for a person; built from parts, exported so the linear-pattern check (test/regex.test.ts) can reach it. */
export const HANDOFF = new RegExp(
  String.raw`\b(?:(?:speak|talk|chat)(?:\s+(?:to|with))\s+${PERSON}|(?:want|need|get|connect me to|transfer me to)\s+${PERSON}|live (?:agent|person|human)|real person|customer (?:service|support))\b`,
  'i',
);

// A match may start only where a run of local-part characters starts (the look-behind), so a long word
// without an "@" is scanned once instead of once from every letter (quadratic: a ReDoS).
const EMAIL = /(?<![\p{L}\p{N}._%+-])[\p{L}\p{N}._%+-]+@[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)*\.\p{L}{2,}/u;
/** E.164-ish: an optional +, then 7 to 15 digits, possibly separated by spaces, dots, dashes, parentheses. */
const PHONE = /(?<![\w@.])\+?\d(?:[\s().-]*\d){6,14}(?![\w@])/;
const NUMBER = /(?<![\w.])-?\d+(?:[.,]\d+)?(?![\w@])/;

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value.trim() !== '' ? value : undefined;
}

/**
 * The opening line, by the first rule that applies:
 * 1. `variables.greeting`, when it is a non-empty string;
 * 2. a quoted line in a behavior sentence that starts with Greet/Say/Introduce/Open/Begin/Start
 *    (`Greet the caller with "Welcome to Acme!"` -> `Welcome to Acme!`);
 * 3. the behavior's first sentence, when it reads like a greeting (starts with Hello/Hi/Hey/Welcome/Good);
 * 4. "Hello! How can I help you today?".
 */
export function greetingFor(behavior: string, variables: Record<string, unknown>): string {
  const configured = str(variables.greeting);
  if (configured) return configured;
  const sentences = behavior
    .trim()
    .split(/(?<=[.!?])\s+|\n+/)
    .map((s) => s.trim())
    .filter(Boolean);
  for (const sentence of sentences) {
    if (!/^(?:greet|say|introduce|open|begin|start)\b/i.test(sentence)) continue;
    // A curly quote's text stops at the next opening quote too, so a run of them is not rescanned from each.
    const quoted = sentence.match(/"([^"]+)"|\u201c([^\u201c\u201d]+)\u201d/);
    const line = quoted?.[1] ?? quoted?.[2];
    if (line?.trim()) return line.trim();
  }
  const first = sentences[0];
  if (first && /^(?:hello|hi|hey|welcome|good (?:morning|afternoon|evening|day))\b/i.test(first)) return first;
  return DEFAULT_GREETING;
}

/** Simple entities: `email`, `phone` (digits, with its leading + if any) and `number` (the first other number). */
export function extractEntities(message: string): Record<string, string> {
  const entities: Record<string, string> = {};
  let rest = message;
  const email = rest.match(EMAIL);
  if (email) {
    entities.email = email[0];
    rest = rest.replace(email[0], ' ');
  }
  const phone = rest.match(PHONE);
  if (phone) {
    const digits = phone[0].replace(/\D/g, '');
    entities.phone = (phone[0].startsWith('+') ? '+' : '') + digits;
    rest = rest.replace(phone[0], ' ');
  }
  const number = rest.match(NUMBER);
  if (number) entities.number = number[0];
  return entities;
}

export function isGoodbye(message: string): boolean {
  return GOODBYE.test(normalizeQuotes(message));
}

export function isHandoffRequest(message: string): boolean {
  return HANDOFF.test(normalizeQuotes(message));
}

function normalizeQuotes(text: string): string {
  return text.replace(/[\u2018\u2019\u02bc]/g, "'").replace(/\s+/g, ' ');
}

/** The goodbye of a channel: "calling" on a phone call, "chatting" elsewhere. */
export function goodbyeFor(channel: string | undefined): string {
  return isVoiceChannel(channel) ? DEFAULT_VOICE_GOODBYE : DEFAULT_GOODBYE;
}

/** The prompt of a channel for a turn without words: whether the caller is still there on a phone call. */
export function noInputFor(channel: string | undefined): string {
  return isVoiceChannel(channel) ? DEFAULT_VOICE_NO_INPUT : DEFAULT_NO_INPUT;
}

/** The handoff line of a channel: "transfer" on a phone call, "connect" elsewhere. */
export function handoffMessageFor(channel: string | undefined): string {
  return isVoiceChannel(channel) ? DEFAULT_VOICE_HANDOFF_MESSAGE : DEFAULT_HANDOFF_MESSAGE;
}

/**
 * The topics that answer a message: its best topic above `minScore`; or, when the message has two or more
 * clauses (split at punctuation and "and", "or", "also", "plus", "but") whose best topics differ, each of those
 * (up to `MAX_COMBINED_TOPICS`, in the clauses' order), so "what time do you open and where do I park?" gets
 * both. A clause counts only through a topic it shares a specific term with (`WEAK_TERMS`).
 */
export function answeringTopics(topics: readonly KnowledgeTopic[], message: string, minScore: number): RankedTopic[] {
  const best = rankTopics(topics, message)[0];
  if (!best || best.score <= minScore) return [];
  const clauses = message.split(CLAUSE_BREAK).filter((c) => c && c.trim());
  if (clauses.length < 2) return [best];
  const picks: RankedTopic[] = [];
  for (const clause of clauses) {
    const top = rankTopics(topics, clause)[0];
    if (!top || top.score <= minScore || !Object.keys(top.terms).some((t) => !WEAK_TERMS.has(t))) continue;
    if (!picks.some((p) => p.topic === top.topic)) picks.push(top);
    if (picks.length === MAX_COMBINED_TOPICS) break;
  }
  return picks.length >= 2 ? picks : [best];
}

function reply(ctx: ResponderContext, partial: Partial<ResponderReply> & { text: string }): ResponderReply {
  const full: ResponderReply = { isOod: false, intents: [], entities: {}, handoff: null, end: false, ...partial };
  ctx.onChunk?.(full.text);
  return full;
}

export function createOfflineResponder(): Responder {
  return {
    name: 'offline',
    async greet(ctx) {
      return reply(ctx, { text: greetingFor(ctx.behavior, ctx.variables) });
    },
    async respond(ctx, message) {
      const vars = ctx.variables;
      // No words at all (a caller's silence, an empty message): nothing was asked, so nothing is out of domain.
      if (message.trim() === '') return reply(ctx, { text: str(vars.no_input) ?? noInputFor(ctx.channel), intents: ['no_input'] });
      const entities = extractEntities(message);
      if (isGoodbye(message)) {
        return reply(ctx, { text: str(vars.goodbye) ?? goodbyeFor(ctx.channel), end: true, intents: ['goodbye'], entities });
      }
      if (isHandoffRequest(message)) {
        return reply(ctx, {
          text: str(vars.handoff_message) ?? handoffMessageFor(ctx.channel),
          handoff: {
            destination: str(vars.handoff_destination) ?? 'live_agent',
            reason: str(vars.handoff_reason) ?? 'user_requested',
          },
          intents: ['handoff'],
          entities,
        });
      }
      const talk = smallTalk(message);
      // Pure small talk ("thank you") is not a question, even if a topic happens to use its words.
      if (!talk.only) {
        const minScore = typeof vars.min_score === 'number' && Number.isFinite(vars.min_score) ? vars.min_score : 0;
        const topics = answeringTopics(ctx.topics, message, minScore);
        if (topics.length) {
          return reply(ctx, { text: topics.map((r) => r.topic.content).join(' '), intents: topics.map((r) => `topic:${r.topic.name}`), entities });
        }
      }
      if (talk.intents.length) {
        return reply(ctx, { text: smallTalkReply(talk.intents[0], ctx.channel), intents: talk.intents, entities });
      }
      return reply(ctx, { text: str(vars.fallback) ?? DEFAULT_FALLBACK, isOod: true, entities });
    },
  };
}
