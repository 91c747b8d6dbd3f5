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
 * What the responder is configured with: `platform/config.ts` reads and checks the `LLM_*` variables once at start
 * and hands these to `createResponder` and `longestReplyMs`, so both see the same values.
 */
export interface LlmSettings {
  /** `LLM_BASE_URL`, trimmed: the OpenAI-compatible client when set (not blank), else the offline responder. */
  baseUrl: string | undefined;
  /** `LLM_API_KEY`, trimmed; blank: none. */
  apiKey: string | undefined;
  /** `LLM_MODEL`, trimmed; blank: `gpt-4o-mini`. */
  model: string;
  /** `LLM_TIMEOUT_MS`; unset: the client's default (`DEFAULT_LLM_TIMEOUT_MS`). */
  timeoutMs: number | undefined;
}

/** The responder the settings ask for: the OpenAI-compatible client when `baseUrl` is set, else the offline responder. */
export function createResponder(llm: LlmSettings): Responder {
  if (!llm.baseUrl) return createOfflineResponder();
  return createOpenAiResponder({ baseUrl: llm.baseUrl, apiKey: llm.apiKey, model: llm.model, timeoutMs: llm.timeoutMs });
}

/**
 * The longest one reply of the responder the settings ask for may take (`createResponder`): its request time
 * limit for each of its rounds, and a function's time (`toolMs`) for a tool call between rounds (one a round: a
 * round that asks for several runs them one after another, and may take longer). 0 for the offline responder,
 * which waits for nothing.
 */
export function longestReplyMs(llm: Pick<LlmSettings, 'baseUrl' | 'timeoutMs'>, toolMs: number): number {
  if (!llm.baseUrl) return 0;
  return (MAX_TOOL_ROUNDS + 1) * (llm.timeoutMs ?? DEFAULT_LLM_TIMEOUT_MS) + MAX_TOOL_ROUNDS * toolMs;
}
