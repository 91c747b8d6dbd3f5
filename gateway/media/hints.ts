import { contentHash } from '../../builder/content.js';
import type { Content } from '../../builder/mod.js';
import type { SpeechHints } from './speech/types.js';

/**
 * What a caller is likely to say to an agent, phrased the way the offline responder recognises it: the
 * goodbyes and the requests for a person (handoff) whole, and every topic's name.
 */
export const GOODBYE_PHRASES = ['goodbye', 'bye', 'bye bye', "that's all", 'that is all', 'nothing else', 'no thanks', 'thank you bye'];
export const HANDOFF_PHRASES = ['talk to a human', 'speak to a human', 'talk to a person', 'speak to an agent', 'talk to an agent', 'i want a human', 'real person', 'customer service', 'live agent', 'an operator'];
const QUESTION_FRAMES = ['%', 'what are your %', 'what is your %', 'what are the %', 'tell me about %', 'i have a question about %', 'is there %'];
const SMALL_WORDS = ['yes', 'no', 'hello', 'hi', 'please', 'thanks', 'thank', 'you', 'i', 'want', 'need', 'what', 'when', 'where', 'how', 'is', 'are', 'the', 'a', 'my', 'your', 'can', 'do', 'to', 'about', 'help', 'me'];
/** A grammar's vocabulary stays small enough to keep the recogniser fast and its choices sharp. */
const MAX_WORDS = 1500;

/** The speech hints of deployed content (cached by the recogniser under `key`). */
export function hintsOf(projectId: string, content: Content, artifactVersion: string | null): SpeechHints {
  const topics = Object.values(content.topics ?? {});
  const words = new Set<string>(SMALL_WORDS);
  for (const t of topics) {
    for (const w of `${t.name} ${t.content}`.toLowerCase().match(/[a-z']+/g) ?? []) {
      if (words.size >= MAX_WORDS) break;
      words.add(w);
    }
  }
  return {
    key: `${projectId}:${artifactVersion ?? contentHash(content)}`,
    // A topic is asked about by name, or in a few common question frames.
    phrases: [...GOODBYE_PHRASES, ...HANDOFF_PHRASES, ...topics.flatMap((t) => QUESTION_FRAMES.map((f) => f.replace('%', t.name.toLowerCase())))],
    words: [...words],
  };
}
