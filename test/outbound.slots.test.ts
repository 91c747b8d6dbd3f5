/**
 * A trunk's line of waiting calls (`TrunkSlots`, actors/call/slots.ts) against the embedded store, for orders
 * of events no HTTP client can arrange: a call that joins the line after calls placed later than it (one
 * resumed by its shard's new owner, or woken after its actor was passivated), one that joins while a later
 * call's claim is in flight, one that resumes holding its slot, and a queue timeout that lands while the
 * call's own claim is in flight. `outbound.queue.test.ts` has the line's order through the API.
 */
import t from 'tap';
import { TrunkMissingError, TrunkSlots } from '../actors/call/slots.js';
import { storeFor } from './helpers/store.js';

const oneLine = async () => 1;

t.test('a call joining the line late takes its place by when it was placed, not when it joined', async (t) => {
  const slots = new TrunkSlots(await storeFor(t));
  await slots.acquire('tc_1', 'OUT-a', 1000, oneLine).done;
  const served: string[] = [];
  // The call placed earlier joins as the later one, alone in the line, looks for a slot (none is free); the
  // slot is freed once that look is over and the line has been looked at again (the trunk's limit read anew).
  let joined!: (task: ReturnType<TrunkSlots['acquire']>) => void;
  const joining = new Promise<ReturnType<TrunkSlots['acquire']>>((resolve) => (joined = resolve));
  let again!: () => void;
  const lookedAgain = new Promise<void>((resolve) => (again = resolve));
  let looks = 0;
  const limit = async () => {
    if (++looks === 1) joined(slots.acquire('tc_1', 'OUT-b', 2000, limit));
    else again();
    return 1;
  };
  const later = slots.acquire('tc_1', 'OUT-c', 3000, limit);
  const earlier = await joining;
  await lookedAgain;
  void later.done.then(() => served.push('OUT-c'));
  void earlier.done.then(() => served.push('OUT-b'));
  await slots.release('tc_1', 'OUT-a');
  await Promise.race([earlier.done, later.done]);
  t.same(served, ['OUT-b'], 'the line goes to the call placed earlier');
  await slots.release('tc_1', 'OUT-b');
  await later.done;
  t.same(served, ['OUT-b', 'OUT-c']);
  await slots.release('tc_1', 'OUT-c');
  t.equal(await slots.inUse('tc_1'), 0);
});

t.test('a call placed in the same millisecond as another waits behind the one that joined first', async (t) => {
  const slots = new TrunkSlots(await storeFor(t));
  await slots.acquire('tc_1', 'OUT-a', 1000, oneLine).done;
  const served: string[] = [];
  const first = slots.acquire('tc_1', 'OUT-z', 2000, oneLine);
  const second = slots.acquire('tc_1', 'OUT-b', 2000, oneLine);
  void first.done.then(() => served.push('OUT-z'));
  void second.done.then(() => served.push('OUT-b'));
  await slots.release('tc_1', 'OUT-a');
  await Promise.race([first.done, second.done]);
  t.same(served, ['OUT-z'], 'the line goes to the call that joined first');
  await slots.release('tc_1', 'OUT-z');
  await second.done;
  await slots.release('tc_1', 'OUT-b');
});

t.test('a call placed earlier that joins while a later call claims the freed slot gets it', async (t) => {
  const slots = new TrunkSlots(await storeFor(t));
  await slots.acquire('tc_1', 'OUT-a', 1000, oneLine).done;
  const served: string[] = [];
  // The later call, alone in the line, starts a claim (held at its reading of the trunk's limit)...
  let asked!: () => void;
  const claiming = new Promise<void>((resolve) => (asked = resolve));
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const later = slots.acquire('tc_1', 'OUT-c', 3000, async () => {
    asked();
    await gate;
    return 1;
  });
  await claiming;
  // ...the call placed before it joins, and the slot is freed: the claim in flight finds it free.
  const earlier = slots.acquire('tc_1', 'OUT-b', 2000, oneLine);
  void later.done.then(() => served.push('OUT-c'));
  void earlier.done.then(() => served.push('OUT-b'));
  await slots.release('tc_1', 'OUT-a');
  open();
  await Promise.race([earlier.done, later.done]);
  t.same(served, ['OUT-b'], 'the call placed earlier has the slot');
  await slots.release('tc_1', 'OUT-b');
  await later.done;
  await slots.release('tc_1', 'OUT-c');
  t.equal(await slots.inUse('tc_1'), 0);
});

t.test('a call that resumes holding its slot has it at once, whoever waits before it', async (t) => {
  const slots = new TrunkSlots(await storeFor(t));
  // Its claim landed as its actor stopped: the slot is its, and no wait of it is running.
  await slots.acquire('tc_1', 'OUT-c', 3000, oneLine).done;
  const earlier = slots.acquire('tc_1', 'OUT-b', 2000, oneLine);
  const resumed = slots.acquire('tc_1', 'OUT-c', 3000, oneLine);
  t.type(await resumed.done, 'number', 'resumed with its slot');
  await slots.release('tc_1', 'OUT-c');
  t.type(await earlier.done, 'number', 'then the call before it gets the line');
  await slots.release('tc_1', 'OUT-b');
});

t.test('a call whose wait ends while its claim is in flight frees the slot the claim takes', async (t) => {
  const slots = new TrunkSlots(await storeFor(t));
  let asked!: () => void;
  const claiming = new Promise<void>((resolve) => (asked = resolve));
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  // The trunk's limit is read as the claim starts: held here, the claim is in flight.
  const wait = slots.acquire('tc_1', 'OUT-a', 1000, async () => {
    asked();
    await gate;
    return 1;
  });
  const stopped = wait.done.then(
    () => 'claimed',
    (err: Error) => err.message,
  );
  await claiming;
  // Its queue timeout: the call stops waiting, and its failure frees its slot, while the claim goes on.
  wait.cancel!();
  const released = slots.release('tc_1', 'OUT-a');
  open();
  await released;
  t.equal(await stopped, 'cancelled', 'the wait ended without a slot');
  t.equal(await slots.inUse('tc_1'), 0, 'no slot is left held by the failed call');
  const next = slots.acquire('tc_1', 'OUT-b', 2000, oneLine);
  t.type(await next.done, 'number', 'the next call gets the line');
  await slots.release('tc_1', 'OUT-b');
});

t.test('a claim that fails other than for a missing trunk keeps the call in its place; a missing trunk ends its wait', async (t) => {
  const warned: string[] = [];
  const slots = new TrunkSlots(await storeFor(t), (msg) => warned.push(msg));
  // The store (here, the trunk's record) fails for two looks, then reads again: the call is not failed for it.
  let looks = 0;
  const flaky = async () => {
    if (++looks <= 2) throw new Error('store unavailable');
    return 1;
  };
  const waiting = slots.acquire('tc_1', 'OUT-a', 1000, flaky);
  const at = await waiting.done;
  t.ok(at > 0, 'the call got its slot once the store answered');
  t.equal(looks, 3, 'after the line looked again');
  t.equal(warned.length, 1, 'told once, not at every look');
  t.match(warned[0], /tc_1/);
  await slots.release('tc_1', 'OUT-a');

  const gone = slots.acquire('tc_2', 'OUT-b', 2000, async () => {
    throw new TrunkMissingError('tc_2');
  });
  await t.rejects(Promise.resolve(gone.done), TrunkMissingError, 'a deleted trunk ends the wait (the call fails: trunk_missing)');
  t.equal(await slots.inUse('tc_1'), 0);
});
