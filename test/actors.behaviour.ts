/**
 * The actor runtime's behaviour, as a suite run against every transport: in-process (one process) and
 * NATS (worker processes). `Cluster` is what a test needs from either.
 */
import { randomUUID } from 'node:crypto';
import type { ActorClient } from '../actors/mod.js';
import { eventually } from './helpers/eventually.js';

export interface Cluster {
  client: ActorClient;
  /** The stored snapshot of an actor, as the admin API describes it. */
  describe(kind: string, id: string): Promise<any | null>;
  /** Live actors across the workers, as they report them. */
  liveActors(): Promise<number>;
  /** Waits until every worker's idle actors are passivated (the passivation delay is short in tests). */
  passivationDelayMs: number;
}

type Counter = { count: number; value: string; fired: number; firedAt: number | null; deadline: number | null };

export function actorBehaviour(t: any, cluster: () => Cluster, options: { skip?: string } = {}): void {
  t.test('a counter counts 1, 2, 3 in order, and its state is stored', options, async (t: any) => {
    const { client, describe } = cluster();
    const id = randomUUID();
    const seen: number[] = [];
    for (let i = 0; i < 20; i++) seen.push((await client.ask<Counter>('counter', id, { type: 'INC' })).count);
    t.same(seen, Array.from({ length: 20 }, (_, i) => i + 1));
    const stored = await describe('counter', id);
    t.equal(stored.context.count, 20);
    t.equal(stored.version, 20, 'one durable snapshot per event, written before the reply');
  });

  t.test('a retried event (same event id) is applied once', options, async (t: any) => {
    const { client } = cluster();
    const id = randomUUID();
    const eventId = randomUUID();
    const first = await client.ask<Counter>('counter', id, { type: 'INC' }, { eventId });
    const again = await client.ask<Counter>('counter', id, { type: 'INC' }, { eventId });
    t.equal(first.count, 1);
    t.equal(again.count, 1, 'the retry gets the first answer');
    t.equal((await client.ask<Counter>('counter', id, { type: 'INC' })).count, 2);
  });

  t.test('a retried event is answered as it first was after the actor was passivated, not applied again', options, async (t: any) => {
    const { client, describe, liveActors, passivationDelayMs } = cluster();
    const id = randomUUID();
    const eventIds = [randomUUID(), randomUUID()];
    const first = [];
    for (const eventId of eventIds) first.push(await client.ask<Counter>('counter', id, { type: 'INC' }, { eventId }));
    t.same((await describe('counter', id)).recentEventIds, eventIds, 'the stored snapshot knows the events it applied');
    t.ok(await eventually(async () => (await liveActors()) === 0, passivationDelayMs + 15_000), 'passivated');
    // Answered by the new activation from the journal entries of the steps that applied them.
    const again = await Promise.all(eventIds.map((eventId) => client.ask<Counter>('counter', id, { type: 'INC' }, { eventId })));
    t.same(again, first, 'each retry gets its own first answer');
    t.equal((await client.ask<Counter>('counter', id, { type: 'INC' })).count, 3, 'neither was applied again');
  });

  t.test('many actors at once, each strictly sequential', options, async (t: any) => {
    const { client } = cluster();
    const ids = Array.from({ length: 40 }, () => randomUUID());
    const results = await Promise.all(
      ids.map(async (id) => {
        const seen: number[] = [];
        for (let i = 0; i < 10; i++) seen.push((await client.ask<Counter>('counter', id, { type: 'INC' })).count);
        return seen;
      }),
    );
    t.ok(results.every((seen) => seen.join() === '1,2,3,4,5,6,7,8,9,10'));
    const same = randomUUID();
    const replies = await Promise.all(Array.from({ length: 30 }, () => client.ask<Counter>('counter', same, { type: 'INC' })));
    t.same(replies.map((r) => r.count).sort((a, b) => a - b), Array.from({ length: 30 }, (_, i) => i + 1), 'concurrent events on one actor run one at a time');
  });

  t.test('idle actors are passivated and come back with their state', options, async (t: any) => {
    const { client, liveActors, passivationDelayMs } = cluster();
    const id = randomUUID();
    await client.ask('counter', id, { type: 'INC' });
    // Workers report live actors with their heartbeats, so wait for the report (well within the delay).
    t.ok(await eventually(async () => (await liveActors()) >= 1, passivationDelayMs), 'live after a message');
    const drained = await eventually(async () => (await liveActors()) === 0, passivationDelayMs + 15_000);
    t.ok(drained, 'nothing live once idle');
    t.equal((await client.ask<Counter>('counter', id, { type: 'INC' })).count, 2, 'reactivated from its snapshot');
  });

  t.test('a timer armed before passivation fires at its original deadline', options, async (t: any) => {
    const { client, describe, passivationDelayMs } = cluster();
    const id = randomUUID();
    const at = Date.now() + passivationDelayMs + 1500;
    const armed = await client.ask<Counter>('counter', id, { type: 'ARM', at });
    t.equal(armed.value, 'armed');
    const stored = await describe('counter', id);
    t.same(stored.deadlines.map((d: any) => d.until), [new Date(at).toISOString()], 'the deadline is in the stored snapshot');
    const fired = await eventually(async () => ((await describe('counter', id))?.context.fired ?? 0) > 0, passivationDelayMs + 20_000);
    t.ok(fired, 'fired without any message');
    const after = await describe('counter', id);
    t.ok(after.context.firedAt >= at, 'not before its deadline');
    t.equal(after.value, 'idle');
    t.same(after.deadlines, []);
  });

  t.test('an unknown kind is refused, not retried', options, async (t: any) => {
    const { client } = cluster();
    const err: any = await client.ask('nosuchkind', 'x', { type: 'PING' }).catch((e: unknown) => e);
    t.equal(err.code, 'UNKNOWN_KIND');
  });
}
