/**
 * BM25 ranking of knowledge-base topics against a query, shared by the offline responder (answers with the
 * best topic) and the OpenAI responder (puts the most relevant topics into the system prompt).
 */
import { tokenize } from './text.js';
import type { KnowledgeTopic } from './types.js';

export interface RankedTopic {
  topic: KnowledgeTopic;
  score: number;
}

/** BM25 parameters: term-frequency saturation and length normalization. */
const K1 = 1.2;
const B = 0.75;
/** A topic's name counts this many times as much as its content. */
export const NAME_WEIGHT = 2;

interface TopicIndex {
  docs: Array<{ topic: KnowledgeTopic; tf: Map<string, number>; length: number }>;
  avgLength: number;
}

/**
 * Term frequencies of each topic, kept per topics array: a caller that passes the same frozen array for
 * every query (the conversation effects do, per deployed artifact) tokenizes its topics once. An array
 * that is not frozen may change, so it is indexed afresh every time.
 */
const indexes = new WeakMap<readonly KnowledgeTopic[], TopicIndex>();

function indexOf(topics: readonly KnowledgeTopic[]): TopicIndex {
  const cached = indexes.get(topics);
  if (cached) return cached;
  const docs = topics.map((topic) => {
    const tf = new Map<string, number>();
    let length = 0;
    const add = (text: string, weight: number) => {
      for (const term of tokenize(text)) {
        tf.set(term, (tf.get(term) ?? 0) + weight);
        length += weight;
      }
    };
    add(topic.name, NAME_WEIGHT);
    add(topic.content, 1);
    return { topic, tf, length };
  });
  const index = { docs, avgLength: docs.reduce((sum, d) => sum + d.length, 0) / docs.length || 1 };
  if (Object.isFrozen(topics)) indexes.set(topics, index);
  return index;
}

/**
 * Scores every topic against the query (BM25 over name x2 + content, with the non-negative
 * `ln(1 + (N - n + 0.5) / (n + 0.5))` idf) and returns those with a positive score, best first; ties keep
 * the deployment order.
 */
export function rankTopics(topics: readonly KnowledgeTopic[], query: string): RankedTopic[] {
  const queryTerms = [...new Set(tokenize(query))];
  if (queryTerms.length === 0 || topics.length === 0) return [];
  const { docs, avgLength } = indexOf(topics);
  const n = docs.length;
  const idf = new Map<string, number>();
  for (const term of queryTerms) {
    const df = docs.filter((d) => d.tf.has(term)).length;
    idf.set(term, Math.log(1 + (n - df + 0.5) / (df + 0.5)));
  }
  const ranked: RankedTopic[] = [];
  for (const doc of docs) {
    let score = 0;
    for (const term of queryTerms) {
      const f = doc.tf.get(term);
      if (!f) continue;
      score += idf.get(term)! * ((f * (K1 + 1)) / (f + K1 * (1 - B + (B * doc.length) / avgLength)));
    }
    if (score > 0) ranked.push({ topic: doc.topic, score });
  }
  // Array.prototype.sort is stable: equal scores keep the topics' order.
  return ranked.sort((a, b) => b.score - a.score);
}
