/**
 * The offline responder: deterministic, no network. It greets from the behavior, ends on goodbye, hands off
 * when the user asks for a person, and otherwise answers with the knowledge-base topic that best matches
 * the message (BM25, see retrieval.ts), or with an out-of-domain fallback.
 *
 * Options, read from the real-time `variables` at each turn (all optional):
 * - `greeting` (string): the opening line.
 * - `goodbye` (string): the closing line when the user says goodbye.
 * - `fallback` (string): the out-of-domain reply.
 * - `handoff_destination`, `handoff_reason` (strings): the handoff target and reason (defaults `live_agent`,
 *   `user_requested`); `handoff_message` (string): what the agent says when handing off.
 * - `min_score` (number): the BM25 score a topic must exceed to be used as the answer (default 0: any
 *   shared non-stop-word term answers; raise it to demand more overlap).
 */
import { rankTopics } from './retrieval.js';
import type { Responder, ResponderContext, ResponderReply } from './types.js';

export const DEFAULT_GREETING = 'Hello! How can I help you today?';
export const DEFAULT_GOODBYE = 'Thank you for calling. Goodbye!';
export const DEFAULT_FALLBACK = "Sorry, I can't help with that. Could you ask me something else?";
export const DEFAULT_HANDOFF_MESSAGE = 'Let me transfer you to someone who can help.';

const GOODBYE = /\b(?:good\s*bye|bye(?:\s*bye)?|that'?s all|that is all|thanks,?\s+bye|see you(?: later)?)\b/i;

const PERSON = String.raw`(?:a |an |the |some |your |a real |a live )?(?:human(?: being)?|person|agent|representative|rep|someone|somebody|operator|real person|live agent|manager|supervisor)`;
const HANDOFF = new RegExp(
  String.raw`\b(?:(?:speak|talk|chat)(?:\s+(?:to|with))\s+${PERSON}|(?:want|need|get|connect me to|transfer me to)\s+${PERSON}|live (?:agent|person|human)|real person|customer (?:service|support))\b`,
  'i',
);

const EMAIL = /[\p{L}\p{N}._%+-]+@[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)*\.\p{L}{2,}/u;
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
    const quoted = sentence.match(/"([^"]+)"|\u201c([^\u201d]+)\u201d/);
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
      const entities = extractEntities(message);
      if (isGoodbye(message)) {
        return reply(ctx, { text: str(vars.goodbye) ?? DEFAULT_GOODBYE, end: true, intents: ['goodbye'], entities });
      }
      if (isHandoffRequest(message)) {
        return reply(ctx, {
          text: str(vars.handoff_message) ?? DEFAULT_HANDOFF_MESSAGE,
          handoff: {
            destination: str(vars.handoff_destination) ?? 'live_agent',
            reason: str(vars.handoff_reason) ?? 'user_requested',
          },
          intents: ['handoff'],
          entities,
        });
      }
      const minScore = typeof vars.min_score === 'number' && Number.isFinite(vars.min_score) ? vars.min_score : 0;
      const best = rankTopics(ctx.topics, message)[0];
      if (best && best.score > minScore) {
        return reply(ctx, { text: best.topic.content, intents: [`topic:${best.topic.name}`], entities });
      }
      return reply(ctx, { text: str(vars.fallback) ?? DEFAULT_FALLBACK, isOod: true, entities });
    },
  };
}
