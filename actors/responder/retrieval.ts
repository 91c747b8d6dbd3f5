/**
 * BM25 ranking of knowledge-base topics against a query, shared by the offline responder (answers with the
 * best topics) and the OpenAI responder (puts the most relevant topics into the system prompt). A query word
 * of at least `MIN_FUZZY_LENGTH` letters that no topic uses is read as the topic word one edit away from it,
 * if there is one ("parkign" as "parking").
 */
import { MIN_FUZZY_LENGTH, MIN_SWAP_LENGTH, swappedLetters, withinOneEdit } from './fuzzy.js';
import { analyze } from './text.js';
import type { KnowledgeTopic } from './types.js';

export interface RankedTopic {
  topic: KnowledgeTopic;
  score: number;
  /** The query terms this topic shares, each with its part of `score`. */
  terms: Record<string, number>;
}

/** BM25 parameters: term-frequency saturation and length normalization. */
const K1 = 1.2;
const B = 0.75;
/** A topic's name counts this many times as much as its content. */
export const NAME_WEIGHT = 2;

interface TopicIndex {
  docs: Array<{ topic: KnowledgeTopic; tf: Map<string, number>; length: number }>;
  avgLength: number;
  /** The words the topics use as written (lowercase), each with its term: where misspellings are looked up. */
  spellings: Map<string, string>;
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
  const spellings = new Map<string, string>();
  const docs = topics.map((topic) => {
    const tf = new Map<string, number>();
    let length = 0;
    const add = (text: string, weight: number) => {
      for (const { word, term } of analyze(text)) {
        tf.set(term, (tf.get(term) ?? 0) + weight);
        length += weight;
        if (!spellings.has(word)) spellings.set(word, term);
      }
    };
    add(topic.name, NAME_WEIGHT);
    add(topic.content, 1);
    return { topic, tf, length };
  });
  const index = { docs, avgLength: docs.reduce((sum, d) => sum + d.length, 0) / docs.length || 1, spellings };
  if (Object.isFrozen(topics)) indexes.set(topics, index);
  return index;
}

/**
 * The query's terms as the index knows them: a term no topic has, from a word of at least
 * `MIN_FUZZY_LENGTH` letters, is replaced by the term of the first topic word one edit away; from a shorter word
 * of at least `MIN_SWAP_LENGTH` letters, by that of the first topic word it is with two adjacent letters swapped.
 */
function queryTerms(index: TopicIndex, query: string): string[] {
  const known = (term: string) => index.docs.some((d) => d.tf.has(term));
  const out = new Set<string>();
  for (const { word, term } of analyze(query)) {
    if (word.length >= MIN_SWAP_LENGTH && !known(term)) {
      const close = word.length >= MIN_FUZZY_LENGTH ? withinOneEdit : swappedLetters;
      let near: string | undefined;
      for (const [spelling, t] of index.spellings) {
        if (close(word, spelling)) {
          near = t;
          break;
        }
      }
      out.add(near ?? term);
    } else {
      out.add(term);
    }
  }
  return [...out];
}

/**
 * Scores every topic against the query (BM25 over name x2 + content, with the non-negative
 * `ln(1 + (N - n + 0.5) / (n + 0.5))` idf) and returns those with a positive score, best first; ties keep
 * the deployment order.
 */
export function rankTopics(topics: readonly KnowledgeTopic[], query: string): RankedTopic[] {
  if (topics.length === 0) return [];
  const index = indexOf(topics);
  const queryTermList = queryTerms(index, query);
  if (queryTermList.length === 0) return [];
  const { docs, avgLength } = index;
  const n = docs.length;
  const idf = new Map<string, number>();
  for (const term of queryTermList) {
    const df = docs.filter((d) => d.tf.has(term)).length;
    idf.set(term, Math.log(1 + (n - df + 0.5) / (df + 0.5)));
  }
  const ranked: RankedTopic[] = [];
  for (const doc of docs) {
    let score = 0;
    const terms: Record<string, number> = {};
    for (const term of queryTermList) {
      const f = doc.tf.get(term);
      if (!f) continue;
      const part = idf.get(term)! * ((f * (K1 + 1)) / (f + K1 * (1 - B + (B * doc.length) / avgLength)));
      terms[term] = part;
      score += part;
    }
    if (score > 0) ranked.push({ topic: doc.topic, score, terms });
  }
  // Array.prototype.sort is stable: equal scores keep the topics' order.
  return ranked.sort((a, b) => b.score - a.score);
}
