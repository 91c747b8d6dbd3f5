/** The agent's responders: the offline default and the OpenAI-compatible LLM client, chosen from the environment. */
import { createOfflineResponder } from './offline.js';
import { createOpenAiResponder, DEFAULT_LLM_TIMEOUT_MS, MAX_TOOL_ROUNDS } from './openai.js';
import type { Responder } from './types.js';

export type {
  HistoryMessage,
  KnowledgeTopic,
  Responder,
  ResponderContext,
  ResponderReply,
  ToolFunction,
} from './types.js';
export {
  answeringTopics,
  createOfflineResponder,
  goodbyeFor,
  greetingFor,
  handoffMessageFor,
  extractEntities,
  isGoodbye,
  isHandoffRequest,
  DEFAULT_FALLBACK,
  DEFAULT_GOODBYE,
  DEFAULT_GREETING,
  DEFAULT_HANDOFF_MESSAGE,
  DEFAULT_VOICE_GOODBYE,
  DEFAULT_VOICE_HANDOFF_MESSAGE,
} from './offline.js';
export { isVoiceChannel, smallTalk, smallTalkReply } from './smalltalk.js';
export type { SmallTalk, SmallTalkIntent } from './smalltalk.js';
export { withinOneEdit, swappedLetters, MIN_FUZZY_LENGTH, MIN_SWAP_LENGTH } from './fuzzy.js';
export { createOpenAiResponder, promptTopics, systemPrompt, MAX_PROMPT_TOPICS, MAX_TOOL_ROUNDS } from './openai.js';
export type { OpenAiResponderOptions } from './openai.js';
export { rankTopics, NAME_WEIGHT } from './retrieval.js';
export type { RankedTopic } from './retrieval.js';
export { analyze, STOP_WORDS, stem, tokenize, words } from './text.js';

export const DEFAULT_LLM_MODEL = 'gpt-4o-mini';

/**
 * The responder the environment asks for: the OpenAI-compatible client when `LLM_BASE_URL` is set (with
 * `LLM_API_KEY`, `LLM_MODEL` (default `gpt-4o-mini`) and `LLM_TIMEOUT_MS`), else the offline responder.
 */
export function createResponderFromEnv(env: Record<string, string | undefined> = process.env): Responder {
  const baseUrl = env.LLM_BASE_URL?.trim();
  if (!baseUrl) return createOfflineResponder();
  return createOpenAiResponder({
    baseUrl,
    apiKey: env.LLM_API_KEY?.trim() || undefined,
    model: env.LLM_MODEL?.trim() || DEFAULT_LLM_MODEL,
    timeoutMs: llmTimeoutOf(env),
  });
}

/** `LLM_TIMEOUT_MS` when it is a positive number, else undefined (the client's default). */
function llmTimeoutOf(env: Record<string, string | undefined>): number | undefined {
  const timeout = Number(env.LLM_TIMEOUT_MS);
  return Number.isFinite(timeout) && timeout > 0 ? timeout : undefined;
}

/**
 * The longest one reply of the responder the environment asks for may take (`createResponderFromEnv`): its
 * request time limit for each of its rounds, and a function's time (`toolMs`) for a tool call between rounds
 * (one a round: a round that asks for several runs them one after another, and may take longer). 0 for the
 * offline responder, which waits for nothing.
 */
export function longestReplyMs(env: Record<string, string | undefined>, toolMs: number): number {
  if (!env.LLM_BASE_URL?.trim()) return 0;
  return (MAX_TOOL_ROUNDS + 1) * (llmTimeoutOf(env) ?? DEFAULT_LLM_TIMEOUT_MS) + MAX_TOOL_ROUNDS * toolMs;
}
