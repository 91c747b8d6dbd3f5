/** `isoOf` writes what `toISOString` writes, through its per-second cache and around it. */
import t from 'tap';
import fc from 'fast-check';
import { isoOf } from '../platform/clock.js';

const LIMIT = 8.64e15; // the range of a Date

t.test('isoOf equals toISOString for any time, and for runs of times in one second', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: -LIMIT, max: LIMIT }), fc.array(fc.integer({ min: -1500, max: 1500 }), { maxLength: 8 }), (base, steps) => {
      for (const ms of [base, ...steps.map((d) => Math.max(-LIMIT, Math.min(LIMIT, base + d)))]) {
        if (isoOf(ms) !== new Date(ms).toISOString()) return false;
      }
      return true;
    }),
    { numRuns: 20_000 },
  );
  t.pass('agrees on 20,000 runs');
});

t.test('isoOf: edges a cache could get wrong', async (t) => {
  const cases = [0, 999, 1000, 1001, -1, -999, -1000, -1001, 1795743448001, 1795743448010, 1795743448100, 253402300799999, 253402300800000, LIMIT, -LIMIT, 1.5, 1795743448001.25];
  for (const ms of cases) t.equal(isoOf(ms), new Date(ms).toISOString(), String(ms));
  t.throws(() => isoOf(NaN), RangeError, 'an invalid time throws as toISOString does');
});
