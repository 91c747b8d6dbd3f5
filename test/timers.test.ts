/**
 * Durable timers with far deadlines. Node's `setTimeout` takes at most 2^31-1 ms (about 24.8 days); a longer
 * delay fires after 1 ms, so a timer that re-armed for "what is left" spun in a 1 ms loop. These tests count
 * the timers `sleepUntil` arms for a 30-day deadline, on an injected clock and on the real one.
 */
import t from 'tap';
import { createActor } from 'xstate';
import { counterMachine } from '../machines/counter.js';
import { MAX_TIMER_STEP_MS, sleepUntil, sleepUntilOn, type TimerClock } from '../actors/timers.js';

const DAY = 86_400_000;

/** A clock that moves only when told, keeping the timers armed on it. */
function fakeClock(start: number) {
  let now = start;
  let next = 1;
  const pending = new Map<number, { at: number; fn: () => void }>();
  const delays: number[] = [];
  const clock: TimerClock = {
    now: () => now,
    setTimeout: (fn, ms) => {
      delays.push(ms);
      pending.set(next, { at: now + Math.max(1, ms), fn });
      return next++;
    },
    clearTimeout: (h) => void pending.delete(h as number),
  };
  /** Moves to the earliest pending timer and fires it; false when none is pending. */
  const fireNext = (): boolean => {
    const [id, first] = [...pending.entries()].sort((a, b) => a[1].at - b[1].at)[0] ?? [];
    if (id === undefined) return false;
    pending.delete(id);
    now = first!.at;
    first!.fn();
    return true;
  };
  return { clock, delays, fireNext, now: () => now, pending: () => pending.size };
}

t.test('a 30-day deadline is slept in steps no timer overflows, and fires once, not early', async (t) => {
  const start = Date.UTC(2026, 0, 1);
  const fake = fakeClock(start);
  const actor = createActor(counterMachine.provide({ actors: { sleepUntil: sleepUntilOn(fake.clock) } }));
  actor.start();
  const until = start + 30 * DAY;
  actor.send({ type: 'ARM', at: until });
  let wakeups = 0;
  while (fake.fireNext()) {
    wakeups++;
    await Promise.resolve(); // the task's promise settles in a microtask
    await Promise.resolve();
    if (fake.now() < until) t.equal(actor.getSnapshot().context.fired, 0, `not fired at ${(fake.now() - start) / DAY} days`);
    if (wakeups > 10) break;
  }
  t.ok(fake.delays.every((d) => d >= 0 && d <= MAX_TIMER_STEP_MS), `every arm within setTimeout's range: ${fake.delays.join(', ')}`);
  t.equal(fake.delays.length, Math.ceil((30 * DAY) / MAX_TIMER_STEP_MS), 'one arm per step of at most 2^31-1 ms');
  t.equal(actor.getSnapshot().context.fired, 1, 'fired once');
  t.equal(actor.getSnapshot().context.firedAt, until, 'at the deadline');
  actor.stop();
});

t.test('stopping a far timer clears the step armed now', async (t) => {
  const fake = fakeClock(0);
  const actor = createActor(counterMachine.provide({ actors: { sleepUntil: sleepUntilOn(fake.clock) } }));
  actor.start();
  actor.send({ type: 'ARM', at: 100 * DAY });
  t.equal(fake.pending(), 1);
  actor.send({ type: 'DISARM' });
  t.equal(fake.pending(), 0, 'nothing left armed');
  actor.stop();
});

t.test('on the real clock a 30-day timer arms once and stays quiet (no 1 ms re-arm loop, no overflow warning)', async (t) => {
  const original = globalThis.setTimeout;
  const warnings: string[] = [];
  const onWarning = (w: Error) => void warnings.push(w.name);
  process.on('warning', onWarning);
  let arms = 0;
  globalThis.setTimeout = ((fn: (...a: unknown[]) => void, ms?: number, ...rest: unknown[]) => {
    arms++;
    return original(fn, ms, ...rest);
  }) as typeof setTimeout;
  const actor = createActor(counterMachine.provide({ actors: { sleepUntil } }));
  try {
    actor.start();
    actor.send({ type: 'ARM', at: Date.now() + 30 * DAY });
    // An observation window, not a performance bound: a spinning timer would re-arm every millisecond in it.
    await new Promise((r) => original(r, 250));
  } finally {
    globalThis.setTimeout = original;
    process.off('warning', onWarning);
    actor.stop();
  }
  t.equal(arms, 1, 'one timer armed');
  t.equal(actor.getSnapshot().context.fired, 0, 'not fired');
  t.notOk(warnings.includes('TimeoutOverflowWarning'), 'no TimeoutOverflowWarning');
});
