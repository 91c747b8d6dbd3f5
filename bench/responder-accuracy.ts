/**
 * Accuracy of the offline responder on the labelled set (test/fixtures/responder-eval.ts), printed beside a
 * naive keyword baseline scored in the same run: the baseline answers with the first topic whose name shares
 * a word (four letters or more) with the question, ends on "bye", hands off on "person", "human" or
 * "agent", and calls everything else out of domain.
 *
 *   npm run build && node dist/bench/responder-accuracy.js
 */
import { createOfflineResponder, words, type KnowledgeTopic } from '../actors/responder/mod.js';
import { evaluate, LABELLED_QUESTIONS, SAMPLE_TOPICS, type Accuracy, type ObservedAnswer } from '../test/fixtures/responder-eval.js';

function keywordBaseline(text: string): ObservedAnswer {
  const ws = new Set(words(text));
  if (ws.has('bye') || ws.has('goodbye')) return { intents: ['goodbye'], isOod: false };
  if (['person', 'human', 'agent'].some((w) => ws.has(w))) return { intents: ['handoff'], isOod: false };
  const hit = SAMPLE_TOPICS.find((topic) => words(topic.name).some((w) => w.length >= 4 && ws.has(w)));
  return hit ? { intents: [`topic:${hit.name}`], isOod: false } : { intents: [], isOod: true };
}

const responder = createOfflineResponder();
const topics = Object.freeze(SAMPLE_TOPICS.map((x) => Object.freeze({ ...x }))) as KnowledgeTopic[];
const offline = await evaluate((text) => responder.respond({ behavior: '', topics, variables: {}, history: [], tools: [], channel: 'WEBCHAT' }, text));
const baseline = await evaluate(keywordBaseline);

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const row = (name: string, a: Accuracy) =>
  `| ${name} | ${pct(a.intent)} | ${pct(a.topic)} | ${(['single', 'multi', 'typo', 'manners', 'ood'] as const).map((g) => pct(a.groups[g])).join(' | ')} |`;
console.log(`${LABELLED_QUESTIONS.length} questions, ${SAMPLE_TOPICS.length} topics`);
console.log('| responder | intent | topic | single | multi | typo | manners | ood |');
console.log('|---|---|---|---|---|---|---|---|');
console.log(row('offline', offline));
console.log(row('keyword baseline', baseline));
for (const m of offline.misses) console.log(`offline miss: "${m.text}": expected ${m.expected}, got ${m.got}`);
