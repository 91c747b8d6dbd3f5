/**
 * The embedded store applies simple update documents (`$set`, `$unset`, `$inc` on named paths) without
 * mingo (`store/lmdb/simple-update.ts`); this holds the result equal to mingo's for any document and
 * update, and checks that anything it does not take is left to mingo untouched.
 */
import t from 'tap';
import fc from 'fast-check';
import { update as mingoUpdate } from 'mingo';
import { applySimpleUpdate } from '../store/lmdb/simple-update.js';

// Objects as the store holds them, with Object's prototype (msgpackr and the JSON parsers make no other):
// fast-check's dictionaries are otherwise now and then null-prototype objects, which mingo's equality tells
// apart from an equal plain one, and ours does not.
const leaf = fc.oneof(fc.integer({ min: -5, max: 5 }), fc.constantFrom('s', '', 'x'), fc.boolean(), fc.constant(null), fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 2 }));
const value = fc.oneof(leaf, fc.dictionary(fc.constantFrom('x', 'y'), leaf, { maxKeys: 2, noNullPrototype: true }));
const doc = fc.dictionary(fc.constantFrom('a', 'b', 'c'), value, { maxKeys: 3, noNullPrototype: true });
const path = fc.constantFrom('a', 'b', 'c', 'd', 'a.x', 'a.y', 'b.x', 'd.e', 'd.e.f', 'a.0', '$bad');
const namedPath = fc.constantFrom('a', 'b', 'c', 'd', 'a.x', 'a.y', 'b.x', 'd.e', 'd.e.f', 'a.0', 'p.1');
const anyUpdate = fc.record(
  {
    $set: fc.dictionary(path, value, { maxKeys: 2, noNullPrototype: true }),
    $unset: fc.dictionary(path, fc.constant(''), { maxKeys: 2, noNullPrototype: true }),
    $inc: fc.dictionary(path, fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constant('n')), { maxKeys: 2, noNullPrototype: true }),
    $push: fc.dictionary(path, leaf, { maxKeys: 1, noNullPrototype: true }),
  },
  { requiredKeys: [] },
);
const simpleUpdate = fc.record(
  {
    $set: fc.dictionary(namedPath, value, { maxKeys: 2, noNullPrototype: true }),
    $unset: fc.dictionary(namedPath, fc.constant(''), { maxKeys: 1, noNullPrototype: true }),
    $inc: fc.dictionary(namedPath, fc.integer({ min: -3, max: 3 }), { maxKeys: 1, noNullPrototype: true }),
  },
  { requiredKeys: [] },
);
const update = fc.oneof({ arbitrary: simpleUpdate, weight: 3 }, { arbitrary: anyUpdate, weight: 1 }).filter((u) => Object.keys(u).length > 0);

t.test('a simple update gives what mingo gives, and leaves the rest to mingo untouched', async (t) => {
  let taken = 0;
  fc.assert(
    fc.property(doc, update, (d, u) => {
      const ours = structuredClone(d) as Record<string, unknown>;
      const theirs = structuredClone(d) as Record<string, unknown>;
      const changed = applySimpleUpdate(ours, u);
      if (changed === null) {
        t.same(ours, d, 'a refused update changes nothing');
        return;
      }
      taken++;
      let mingoChanged: string[];
      try {
        mingoChanged = mingoUpdate(theirs, u as never);
      } catch {
        t.fail(`mingo refuses ${JSON.stringify(u)} on ${JSON.stringify(d)}, which was applied`);
        return;
      }
      t.same(ours, theirs, `${JSON.stringify(u)} on ${JSON.stringify(d)}`);
      t.equal(changed.length > 0, mingoChanged.length > 0, `changed or not: ${JSON.stringify(u)} on ${JSON.stringify(d)}`);
    }),
    { numRuns: 3000 },
  );
  t.ok(taken > 200, `many updates were taken (the rest conflict or meet a non-object), so the equality was tested (${taken})`);
});

t.test('the update documents the projection runner and the metric buckets write are taken', async (t) => {
  const checkpoint: Record<string, unknown> = { id: 'conversations', epoch: 1, partitions: { 0: 5 }, runners: { r1: { at: 1 }, r0: { at: 0 } } };
  t.ok(applySimpleUpdate(checkpoint, { $set: { 'partitions.1': 7, 'runners.r1': { at: 2 }, updated_at: 3 }, $unset: { 'runners.r0': '' } }));
  t.same(checkpoint, { id: 'conversations', epoch: 1, partitions: { 0: 5, 1: 7 }, runners: { r1: { at: 2 } }, updated_at: 3 });
  const restarted: Record<string, unknown> = { id: 'x', epoch: 4, partitions: { 0: 9 } };
  t.same(applySimpleUpdate(restarted, { $set: { partitions: {}, runners: {}, updated_at: 5 }, $inc: { epoch: 1 } }), ['partitions', 'runners', 'updated_at', 'epoch']);
  t.same(restarted, { id: 'x', epoch: 5, partitions: {}, runners: {}, updated_at: 5 });
  t.equal(applySimpleUpdate({ a: [1] }, { $set: { 'a.0': 2 } }), null, 'array positions go to mingo');
  t.same(applySimpleUpdate({ p: { 0: 1 } }, { $set: { 'p.0': 2 } }), ['p.0'], 'a numeric name in an object is a field');
  t.equal(applySimpleUpdate({ a: 's' }, { $inc: { a: 1 } }), null, '$inc of a non-number goes to mingo');
  t.equal(applySimpleUpdate({}, { $push: { a: 1 } }), null, 'other operators go to mingo');
});
