/** The runner's lag window (`actors/projection/lag.ts`): nearest-rank percentiles, sorted at most every 200 ms. */
import t from 'tap';
import { LagWindow, SUMMARY_EVERY_MS } from '../actors/projection/lag.js';

t.test('percentiles of the latest samples, nearest rank; null before any', async (t) => {
  const w = new LagWindow(100);
  t.equal(w.summary(0), null);
  for (let i = 1; i <= 100; i++) w.add(i);
  t.same(w.summary(0), { p50: 50, p99: 99, samples: 100 });
  for (let i = 0; i < 100; i++) w.add(1000);
  t.same(w.summary(SUMMARY_EVERY_MS), { p50: 1000, p99: 1000, samples: 100 }, 'the ring keeps the latest only');
});

t.test('a summary is reported again until it is SUMMARY_EVERY_MS old, then the window is sorted afresh', async (t) => {
  const w = new LagWindow(10);
  w.add(5);
  const first = w.summary(1000);
  t.same(first, { p50: 5, p99: 5, samples: 1 });
  w.add(500);
  t.equal(w.summary(1000 + SUMMARY_EVERY_MS - 1), first, 'not sorted again within the interval');
  t.same(w.summary(1000 + SUMMARY_EVERY_MS), { p50: 5, p99: 500, samples: 2 }, 'sorted again after it');
  const later = w.summary(1000 + SUMMARY_EVERY_MS);
  t.equal(w.summary(1_000_000), later, 'no new sample: nothing to sort, however old');
});
