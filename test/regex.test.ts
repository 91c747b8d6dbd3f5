/**
 * Regular expressions stay linear in their input (ReDoS). A backtracking engine can take quadratic or
 * exponential time on a crafted input: the offline responder's e-mail pattern once spent seconds of CPU on
 * one 127 KiB word sent through the Messaging API. This file
 * 1. finds every regular expression literal in the platform's sources (TypeScript's parser) and asks the
 *    recheck ReDoS checker about each: all must be safe, except those listed in NOT_USER_INPUT with why;
 * 2. knows every pattern built at run time (`new RegExp`) and checks it the same way;
 * 3. runs every pattern on worst-case inputs of 128 KiB (long runs of one character and of character pairs,
 *    broken at the end, plus recheck's own attack strings) and bounds the CPU time of each run generously
 *    (a quadratic pattern takes seconds there; a linear one, milliseconds);
 * 4. sends such words through the whole offline responder.
 * actors/functions/ (the project-function sandbox) is included: its own patterns see tenant sources.
 */
import t from 'tap';
import { checkSync } from 'recheck';
import { createOfflineResponder, HANDOFF } from '../actors/responder/offline.js';
import { adversarialInputs, cpuMs, findRegexes } from './helpers/regexes.js';

const DIRS = ['actors', 'gateway', 'builder', 'tenancy', 'platform', 'store', 'machines', 'bin'];
const SKIP: string[] = [];
const SIZE = 128 * 1024;
/** A generous CPU bound for one run over 128 KiB: far above a linear scan, far below a quadratic one. */
const BOUND_MS = 1000;

/** Patterns that only ever see the operator's own configuration, never a request: file → source. */
const NOT_USER_INPUT: Record<string, string> = {
  // EMBEDDINGS_BASE_URL, from the operator's environment.
  'actors/conversation/embedding.ts': String.raw`\/+$`,
};

/** Every pattern built at run time, by file, with the value it builds. */
const CONSTRUCTED: Record<string, RegExp[]> = { 'actors/responder/offline.ts': [HANDOFF] };

const { literals, constructed } = findRegexes(DIRS, SKIP);
const all = [
  ...literals,
  ...Object.entries(CONSTRUCTED).flatMap(([file, res]) => res.map((re) => ({ file, line: 0, source: re.source, flags: re.flags }))),
];
// The fuzzer's stages are bounded by steps only, not also by time (their defaults): a time bound cuts the search
// short at a different place on a loaded machine, and the verdict would then depend on the load.
const RECHECK = { timeout: 60_000, incubationTimeout: null, seedingTimeout: null, attackTimeout: null } as const;
const verdicts = new Map(all.map((r) => [r, checkSync(r.source, r.flags, RECHECK)]));

t.test('the scan finds the patterns (sanity)', async (t) => {
  t.ok(literals.length >= 50, `${literals.length} literals`);
  t.ok(literals.some((r) => r.file === 'actors/responder/offline.ts' && r.source.includes('@')), 'the e-mail pattern is among them');
  t.same([...new Set(constructed.map((c) => c.file))].sort(), Object.keys(CONSTRUCTED).sort(), 'every run-time pattern is known to this test');
});

t.test('recheck finds every pattern safe', async (t) => {
  for (const r of all) {
    const result = verdicts.get(r)!;
    const where = `${r.file}:${r.line} /${r.source}/${r.flags}`;
    if (NOT_USER_INPUT[r.file] === r.source) {
      t.pass(`${where}: ${result.status}, not applied to user input`);
      continue;
    }
    t.equal(result.status, 'safe', `${where}: ${result.status === 'vulnerable' ? result.complexity.summary : result.status}`);
  }
});

t.test('every pattern runs in linear time on 128 KiB worst-case inputs', async (t) => {
  for (const r of all.filter((x) => NOT_USER_INPUT[x.file] !== x.source)) {
    const attack = verdicts.get(r)!;
    const inputs = adversarialInputs(SIZE, attack.status === 'vulnerable' ? [attack.attack.string] : []);
    // Non-global: exec tries every start position (the worst case of a search); global: every match.
    const search = new RegExp(r.source, r.flags.replace(/[gy]/g, ''));
    const global = r.flags.includes('g') ? new RegExp(r.source, r.flags) : null;
    let worst = 0;
    let worstInput = '';
    for (const input of inputs) {
      const ms = cpuMs(() => {
        search.exec(input);
        if (global) input.replace(global, '');
      });
      if (ms > worst) [worst, worstInput] = [ms, input.slice(0, 8)];
    }
    t.ok(worst < BOUND_MS, `${r.file}:${r.line} /${r.source.slice(0, 60)}/: worst run under ${BOUND_MS} ms of CPU (on ${JSON.stringify(worstInput)}...)`);
  }
});

t.test('the offline responder answers 128 KiB adversarial words at once', async (t) => {
  const r = createOfflineResponder();
  const topics = [
    { name: 'Opening hours', content: 'We are open from 9am to 5pm, Monday to Friday. Mail hours@example.com or call +1 555 123 4567.' },
    { name: 'Parking', content: 'Free parking is available behind the store.' },
  ];
  const behavior = `Greet the caller with "${'\u201c'.repeat(1000)}". ${'"'.repeat(1000)}`;
  const inputs = [...adversarialInputs(SIZE), 'a'.repeat(SIZE - 1) + '@', 'a@'.repeat(SIZE / 2), '1 '.repeat(SIZE / 2), 'parkign'.repeat(SIZE / 7)];
  let worst = 0;
  for (const input of inputs) {
    const ms = cpuMs(() => void r.respond({ behavior, topics, variables: {}, history: [], tools: [] }, input));
    worst = Math.max(worst, ms);
  }
  t.ok(worst < BOUND_MS, `worst reply under ${BOUND_MS} ms of CPU over ${inputs.length} inputs`);
  t.ok(cpuMs(() => void r.greet({ behavior: `Greet them with ${'\u201c'.repeat(SIZE)}`, topics, variables: {}, history: [], tools: [] })) < BOUND_MS, 'a behavior full of open quotes');
});
