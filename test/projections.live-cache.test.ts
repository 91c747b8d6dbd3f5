/**
 * `LiveCache`, what projectors keep per live actor between batches: least recently used goes first, but only
 * once idle, so that more live actors than room, taking turns in a cycle, still hit for those it holds.
 */
import t from 'tap';
import { LiveCache } from '../actors/projection/live-cache.js';

/** A clock the test moves. */
const clock = () => {
  let now = 0;
  return { now: () => now, advance: (ms: number) => void (now += ms) };
};

/** Plays `rounds` cycles over `ids` actors as a projector does (take, then set again), one per ms; the hits. */
function cycle(cache: LiveCache<number>, c: ReturnType<typeof clock>, ids: number, rounds: number): number {
  let hits = 0;
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < ids; i++) {
      if (cache.take(`a${i}`) !== undefined) hits++;
      cache.set(`a${i}`, r);
      c.advance(1);
    }
  }
  return hits;
}

t.test('more live actors than room, in a cycle: the ones held keep hitting (plain LRU would miss every time)', async (t) => {
  const c = clock();
  const cache = new LiveCache<number>(4, 60_000, c.now);
  const hits = cycle(cache, c, 5, 10);
  // The first round fills the cache (4 kept, the 5th refused); each later round hits the 4 held.
  t.equal(hits, 4 * 9);
  t.equal(cache.size, 4);
});

t.test('an entry idle for idleMs makes room; a busy one does not', async (t) => {
  const c = clock();
  const cache = new LiveCache<string>(2, 1000, c.now);
  t.ok(cache.set('a', 'A'));
  c.advance(10);
  t.ok(cache.set('b', 'B'));
  c.advance(10);
  t.notOk(cache.set('c', 'C'), 'full, and the least recently used was used 20 ms ago: not kept');
  t.equal(cache.take('c'), undefined);
  c.advance(985);
  t.ok(cache.set('c', 'C'), '"a" idle for a second: evicted for "c"');
  t.equal(cache.take('a'), undefined);
  t.equal(cache.take('b'), 'B');
  t.equal(cache.take('b'), undefined, 'take removes');
});

t.test('set on a held id replaces it and makes it the most recently used; delete and clear', async (t) => {
  const c = clock();
  const cache = new LiveCache<string>(2, 100, c.now);
  cache.set('a', 'A1');
  c.advance(50);
  cache.set('b', 'B');
  c.advance(50);
  t.ok(cache.set('a', 'A2'), 'already held: never refused');
  c.advance(60);
  // "b" (used 110 ms ago) is now the least recently used and idle; "a" was used 60 ms ago.
  t.ok(cache.set('c', 'C'));
  t.equal(cache.take('b'), undefined);
  t.equal(cache.take('a'), 'A2');
  cache.delete('c');
  t.equal(cache.size, 0);
  cache.set('d', 'D');
  cache.clear();
  t.equal(cache.size, 0);
});
