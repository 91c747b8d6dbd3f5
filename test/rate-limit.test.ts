/**
 * The token buckets every rate limit uses (`platform/rate-limit.ts`): a key refills at its rate up to its burst,
 * a refused take says how long to wait, and a bucket is forgotten only once it is full again, so that at a low
 * rate (a token every few minutes) an idle key does not get a whole burst back early (the audit's L1: buckets
 * untouched for ten minutes were forgotten, and a sender that emptied one every eleven minutes got 15,515 events
 * through in six hours at 0.01/s, burst 500, where 716 were allowed).
 */
import t from 'tap';
import fc from 'fast-check';
import { RateLimiter } from '../platform/rate-limit.js';

const T0 = 1_000_000;

t.test('a bucket refills at its rate up to its burst; a refused take says when to retry', async (t) => {
  const limiter = new RateLimiter(2, 3);
  t.same([0, 0, 0].map(() => limiter.take('k', T0)), [0, 0, 0], 'the burst');
  t.equal(limiter.take('k', T0), 1, 'then the whole seconds until a token');
  t.equal(limiter.take('k', T0 + 500), 0, 'one token half a second later at 2/s');
  t.equal(limiter.take('other', T0 + 500), 0, 'another key has its own bucket');
});

t.test('a bucket still refilling is not forgotten, however long it has been untouched', async (t) => {
  const limiter = new RateLimiter(0.01, 500);
  for (let i = 0; i < 500; i++) limiter.take('project', T0);
  t.ok(limiter.take('project', T0) > 0, 'empty');
  // Eleven minutes later: 6.6 tokens back, not 500.
  const later = T0 + 11 * 60_000;
  limiter.sweep(later);
  t.equal(limiter.size, 1, 'kept by the sweep');
  let taken = 0;
  while (limiter.take('project', later) === 0) taken++;
  t.equal(taken, 6, 'only what refilled');
});

t.test('a full bucket is forgotten, and nothing changes for its key', async (t) => {
  const limiter = new RateLimiter(1, 5);
  limiter.take('a', T0);
  limiter.sweep(T0 + 500);
  t.equal(limiter.size, 1, 'not full yet');
  limiter.sweep(T0 + 1000);
  t.equal(limiter.size, 0, 'full again: forgotten');
  t.same(Array.from({ length: 6 }, () => limiter.take('a', T0 + 1000)).map((w) => w > 0), [false, false, false, false, false, true], 'a fresh burst, as the kept bucket would have had');
});

t.test('sweeps never let a key past rate × time + burst (fast-check)', async (t) => {
  fc.assert(
    fc.property(
      fc.double({ min: 0.001, max: 50, noNaN: true }),
      fc.integer({ min: 1, max: 200 }),
      fc.array(fc.tuple(fc.integer({ min: 0, max: 3_600_000 }), fc.boolean()), { minLength: 1, maxLength: 200 }),
      (rate, burst, steps) => {
        const limiter = new RateLimiter(rate, burst);
        let now = T0;
        let admitted = 0;
        for (const [gap, sweep] of steps) {
          now += gap;
          if (sweep) limiter.sweep(now);
          while (limiter.take('k', now) === 0) admitted++;
        }
        return admitted <= burst + Math.floor(((now - T0) / 1000) * rate) + 1;
      },
    ),
    { numRuns: 300 },
  );
  t.pass('300 schedules');
});
