import t from 'tap';
import fc from 'fast-check';
import { threeWayMerge } from '../builder/merge.js';
import { contentHash, emptyContent, type Content } from '../builder/content.js';
import { mergePatch } from '../builder/realtime-configs.js';

const topic = (id: string, name: string, content: string) => ({ id, name, content });
const withTopics = (behavior: string, ...topics: ReturnType<typeof topic>[]): Content => ({
  ...emptyContent(),
  behavior,
  topics: Object.fromEntries(topics.map((x) => [x.id, x])),
});

t.test('three-way merge, case by case', async (t) => {
  const base = withTopics('b', topic('t1', 'A', 'a'), topic('t2', 'B', 'b'));
  const cases: Array<[string, Content, Content, { behavior?: string; topics?: string[]; conflicts: string[] }]> = [
    ['nothing changed', base, base, { behavior: 'b', topics: ['A:a', 'B:b'], conflicts: [] }],
    ['branch changed behavior', base, withTopics('x', topic('t1', 'A', 'a'), topic('t2', 'B', 'b')), { behavior: 'x', conflicts: [] }],
    ['main changed behavior', withTopics('m', topic('t1', 'A', 'a'), topic('t2', 'B', 'b')), base, { behavior: 'm', conflicts: [] }],
    ['both changed behavior alike', withTopics('s', topic('t1', 'A', 'a'), topic('t2', 'B', 'b')), withTopics('s', topic('t1', 'A', 'a'), topic('t2', 'B', 'b')), { behavior: 's', conflicts: [] }],
    ['both changed behavior differently', withTopics('m', topic('t1', 'A', 'a'), topic('t2', 'B', 'b')), withTopics('x', topic('t1', 'A', 'a'), topic('t2', 'B', 'b')), { behavior: 'm', conflicts: ['behavior'] }],
    ['branch deleted a topic', base, withTopics('b', topic('t1', 'A', 'a')), { topics: ['A:a'], conflicts: [] }],
    ['branch deleted what main changed', withTopics('b', topic('t1', 'A', 'a'), topic('t2', 'B', 'new')), withTopics('b', topic('t1', 'A', 'a')), { conflicts: ['topics.t2'] }],
    ['each side changed a different topic', withTopics('b', topic('t1', 'A', 'm'), topic('t2', 'B', 'b')), withTopics('b', topic('t1', 'A', 'a'), topic('t2', 'B', 'x')), { topics: ['A:m', 'B:x'], conflicts: [] }],
    ['both added the same name', withTopics('b', topic('t1', 'A', 'a'), topic('t2', 'B', 'b'), topic('t3', 'C', '1')), withTopics('b', topic('t1', 'A', 'a'), topic('t2', 'B', 'b'), topic('t4', 'C', '2')), { conflicts: ['topics.t4'] }],
  ];
  for (const [name, ours, theirs, want] of cases) {
    const out = threeWayMerge(base, ours, theirs);
    t.same(out.conflicts.map((c) => c.field), want.conflicts, `${name}: conflicts`);
    if (want.behavior !== undefined) t.equal(out.content.behavior, want.behavior, `${name}: behavior`);
    if (want.topics) t.same(Object.values(out.content.topics).map((x) => `${x.name}:${x.content}`).sort(), want.topics, `${name}: topics`);
  }
});

t.test("a name added on both sides: the conflict is the branch's item, its message names main's", async (t) => {
  const base = withTopics('b');
  for (const [mainId, branchId] of [['t1', 't2'], ['t2', 't1']]) {
    const out = threeWayMerge(base, withTopics('b', topic(mainId, 'Dup', 'm')), withTopics('b', topic(branchId, 'Dup', 'x')));
    t.same(out.conflicts, [{ field: `topics.${branchId}`, message: `name "Dup" is also used by ${mainId} on main` }], `main's ${mainId}, the branch's ${branchId}`);
  }
});

const contentArb: fc.Arbitrary<Content> = fc
  .record({
    behavior: fc.string({ maxLength: 8 }),
    topics: fc.uniqueArray(fc.record({ id: fc.constantFrom('t1', 't2', 't3', 't4'), content: fc.string({ maxLength: 4 }) }), { selector: (x) => x.id, maxLength: 4 }),
  })
  .map(({ behavior, topics }) => ({ ...emptyContent(), behavior, topics: Object.fromEntries(topics.map((x) => [x.id, topic(x.id, x.id, x.content)])) }));

t.test('merge properties', async (t) => {
  fc.assert(
    fc.property(contentArb, contentArb, (base, theirs) => {
      const out = threeWayMerge(base, base, theirs);
      return out.conflicts.length === 0 && contentHash(out.content) === contentHash(theirs);
    }),
    { numRuns: 300 },
  );
  t.pass('main unchanged since the base: the merge is the branch');
  fc.assert(
    fc.property(contentArb, contentArb, (base, ours) => {
      const out = threeWayMerge(base, ours, base);
      return out.conflicts.length === 0 && contentHash(out.content) === contentHash(ours) && out.applied.length === 0;
    }),
    { numRuns: 300 },
  );
  t.pass('branch unchanged since the base: the merge is main, nothing applied');
  fc.assert(
    fc.property(contentArb, contentArb, contentArb, (base, ours, theirs) => {
      const a = threeWayMerge(base, ours, theirs);
      const b = threeWayMerge(base, ours, theirs);
      return contentHash(a.content) === contentHash(b.content);
    }),
  );
  t.pass('the merge is deterministic');
});

t.test('content hash ignores key order', async (t) => {
  const a = { ...emptyContent(), behavior: 'x', topics: { t1: topic('t1', 'A', 'a'), t2: topic('t2', 'B', 'b') } };
  const b = { ...emptyContent(), topics: { t2: topic('t2', 'B', 'b'), t1: topic('t1', 'A', 'a') }, behavior: 'x' };
  t.equal(contentHash(a), contentHash(b));
  t.not(contentHash(a), contentHash({ ...a, behavior: 'y' }));
});

t.test('JSON merge patch', async (t) => {
  t.same(mergePatch({ a: 1, b: { c: 2, d: 3 } }, { a: null, b: { c: 5, d: null }, e: [1] }), { b: { c: 5 }, e: [1] });
  t.same(mergePatch({ a: { b: 1 } }, { a: 7 }), { a: 7 });
  const dict = fc.dictionary(fc.string({ maxLength: 3 }), fc.jsonValue({ maxDepth: 2 })) as fc.Arbitrary<Record<string, unknown>>;
  fc.assert(fc.property(dict, (x) => JSON.stringify(mergePatch(x, {})) === JSON.stringify(x)));
  fc.assert(fc.property(dict, dict, (x, patch) => JSON.stringify(mergePatch(mergePatch(x, patch), patch)) === JSON.stringify(mergePatch(x, patch))));
  t.pass('an empty patch changes nothing; a patch applied twice is applied once');
});
