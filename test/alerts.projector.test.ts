/**
 * The metrics projector on a real LMDB store: each journal entry kind feeds its metric (call_crashes from a
 * crashed conversation end and a crashed call, which no running component emits yet), per project and per
 * account; re-applying a batch (after a crash) changes nothing; a lane per journal partition, the lanes adding up; the
 * latency histogram merges minutes; reset drops everything. The edge's 5xx counter appends one entry.
 */
import t from 'tap';
import type { JournalEntry } from '../store/mod.js';
import { accountScope, EdgeErrorCounter, metricBuckets, metricsProjector, metricValue, projectScope, quantile, readWindow, LATENCY_BOUNDS, bucketOf } from '../actors/metrics/mod.js';
import { partitionOf, type Partitioning } from '../actors/mod.js';
import { countWritesInFlight } from './helpers/in-flight.js';
import { storeFor } from './helpers/store.js';

const store = await storeFor(t, 'sb-metrics-');
const projector = metricsProjector();
/** The journal's partitions as a runner hands them (the platform's default count). */
const PARTS: Partitioning = { count: 16, of: (e) => partitionOf(e, 16) };
/** The lanes (partitions) `entries` fall in. */
const lanesOf = (entries: JournalEntry[]) => new Set(entries.map((e) => PARTS.of(e))).size;
const T0 = Date.parse('2026-03-02T10:00:30.000Z');
const owner = { account_id: 'acc', project_id: 'proj' };
let seq = 0;
const entry = (kind: string, shard: number, at: number, events: Array<{ type: string; data: Record<string, unknown> }>): JournalEntry => ({
  seq: ++seq, key: `${kind}/x${shard}`, kind, id: `x${shard}`, shard, version: seq, at, value: null, events,
});

t.test('a window holds every event of its span: the bucket holding its start is read whole', async (t) => {
  await projector.reset(store);
  await projector.apply([entry('conversation', 9, T0, [{ type: 'conversation.turn', data: { ...owner, latency_ms: 10, function_errors: 3 } }])], store, PARTS);
  const errors = async (at: number) => metricValue(await readWindow(store, projectScope('proj'), at, 5), 'function_errors');
  t.equal(await errors(T0), 3, 'at once');
  t.equal(await errors(T0 + 270_000), 3, '4.5 minutes on: in a 5-minute window (read short, it fell out at the next minute, 4.5 minutes on)');
  t.equal(await errors(T0 + 300_000), 3, 'exactly 5 minutes on');
  t.equal(await errors(T0 + 329_999), 3, "5.5 minutes on: still in the oldest bucket read, which began before the window's start");
  t.equal(await errors(T0 + 330_000), null, 'once its minute is more than 5 minutes back, gone');
  await projector.reset(store);
});

t.test('each metric from its events, per project and per account', async (t) => {
  const batch = [
    entry('conversation', 1, T0, [{ type: 'conversation.started', data: { ...owner, channel: 'CHAT' } }]),
    entry('conversation', 1, T0, [{ type: 'conversation.turn', data: { ...owner, latency_ms: 120, function_errors: 2 } }]),
    entry('conversation', 2, T0 + 60_000, [{ type: 'conversation.turn', data: { ...owner, latency_ms: 900, function_errors: 0 } }]),
    entry('conversation', 2, T0 + 60_000, [{ type: 'conversation.ended', data: { ...owner, crashed: true, reason: 'error' } }]),
    entry('conversation', 2, T0 + 60_000, [{ type: 'conversation.ended', data: { ...owner, crashed: false, reason: 'closed' } }]),
    entry('call', 3, T0, [{ type: 'call.failed', data: { ...owner, call_sid: 'c1', reason: 'sandbox_crash' } }]),
    entry('call', 3, T0, [{ type: 'call.failed', data: { ...owner, call_sid: 'c2', reason: 'busy' } }]),
    entry('edge', -1, T0 + 120_000, [{ type: 'http.errors', data: { ...owner, family: 'chat', status: 503, count: 4, minute: Math.floor(T0 / 60_000) } }]),
    entry('conversation', 4, T0, [{ type: 'conversation.started', data: { account_id: 'acc', project_id: 'other', channel: 'VOICE' } }]),
  ];
  await projector.apply(batch, store, PARTS);
  const at = T0 + 120_000;
  const sums = await readWindow(store, projectScope('proj'), at, 5);
  t.equal(metricValue(sums, 'call_volume'), 1);
  t.equal(metricValue(sums, 'function_errors'), 2);
  t.equal(metricValue(sums, 'call_crashes'), 2, 'a crashed conversation and a crashed call; a busy callee is not ours');
  t.equal(metricValue(sums, 'api_errors'), 4, 'counted in the minute they were answered in');
  t.equal(metricValue(sums, 'turn_latency_p50'), 125);
  t.equal(metricValue(sums, 'turn_latency_p95'), 900);
  const account = await readWindow(store, accountScope('acc'), at, 5);
  t.equal(metricValue(account, 'call_volume'), 2, 'the account counts every project');
  t.equal(metricValue(await readWindow(store, projectScope('proj'), T0 + 150_000, 1), 'function_errors'), null, 'a 1-minute window ending a minute after the last entry holds no data');
  t.equal(metricValue(await readWindow(store, projectScope('none'), at, 60), 'call_volume'), null, 'no data');

  // Re-applied after a crash: nothing counted twice.
  await projector.apply(batch, store, PARTS);
  t.equal(metricValue(await readWindow(store, projectScope('proj'), at, 5), 'function_errors'), 2, 'idempotent');
  const ofProj = batch.filter((e) => e.events[0].data.project_id === 'proj');
  const lanes = new Set(ofProj.map((e) => `${Math.floor((e.events[0].type === 'http.errors' ? T0 : e.at) / 60_000)}|${PARTS.of(e)}`));
  t.equal((await metricBuckets(store).find({ scope: projectScope('proj') })).length, lanes.size, 'one bucket per minute and partition');

  await projector.reset(store);
  t.equal(metricValue(await readWindow(store, projectScope('proj'), at, 60), 'call_volume'), null, 'reset drops the buckets');
});

t.test('the buckets of one batch are written together, so they share one group commit', async (t) => {
  // Counts the bucket writes in flight at once, on the real store. One after the other, each write would wait
  // for a commit and its flush of its own: a batch touching 32 buckets took 32 commits.
  const counted = countWritesInFlight(store, 'metric_buckets');
  const lanes = 8;
  const batch = Array.from({ length: lanes }, (_, shard) => entry('conversation', 10 + shard, T0, [{ type: 'conversation.started', data: { ...owner, channel: 'CHAT' } }]));
  await projector.apply(batch, counted.store, PARTS);
  t.equal(counted.most(), lanesOf(batch) * 2, 'every bucket (a project and an account bucket per lane) in flight at once');
  t.equal(metricValue(await readWindow(store, accountScope('acc'), T0 + 60_000, 5), 'call_volume'), lanes, 'and all of them written');
  await projector.reset(store);
});

t.test("the entries of a partition share its buckets, whatever their shards; without partitions, one lane", async (t) => {
  // 64 shards' turns in one minute: a bucket per partition and scope, not per shard.
  const batch = Array.from({ length: 64 }, (_, shard) => entry('conversation', shard, T0, [{ type: 'conversation.turn', data: { ...owner, latency_ms: 100, function_errors: 0 } }]));
  await projector.apply(batch, store, PARTS);
  t.equal(lanesOf(batch), 16);
  t.equal((await metricBuckets(store).find({})).length, 16 * 2, 'a project and an account bucket per partition');
  t.equal(metricValue(await readWindow(store, projectScope('proj'), T0 + 60_000, 5), 'turn_latency_p50'), 100);
  t.equal((await readWindow(store, accountScope('acc'), T0 + 60_000, 5)).counts.turns, 64, 'every turn counted once');
  await projector.reset(store);
  await projector.apply(batch, store);
  t.equal((await metricBuckets(store).find({})).length, 2, 'a caller that names no partitioning: one partition');
  t.equal((await readWindow(store, accountScope('acc'), T0 + 60_000, 5)).counts.turns, 64);
  await projector.reset(store);
});

t.test('histogram: buckets, quantiles and merging', async (t) => {
  t.equal(bucketOf(0), 0);
  t.equal(LATENCY_BOUNDS[bucketOf(5)], 5);
  t.equal(LATENCY_BOUNDS[bucketOf(6)], 10);
  t.equal(bucketOf(1e9), LATENCY_BOUNDS.length, 'overflow');
  t.equal(quantile({}, 0.5), null);
  t.equal(quantile({ [bucketOf(50)]: 9, [bucketOf(2000)]: 1 }, 0.5), 50);
  t.equal(quantile({ [bucketOf(50)]: 9, [bucketOf(2000)]: 1 }, 0.95), 2000);
  t.equal(quantile({ [bucketOf(1e9)]: 1 }, 0.5), LATENCY_BOUNDS[LATENCY_BOUNDS.length - 1]);
});

t.test('the edge counter appends its 5xx counts as one edge entry', async (t) => {
  const before = await store.journal.head();
  const counter = new EdgeErrorCounter(store.journal, { flushMs: 60_000, processId: 'edge1', now: () => T0 });
  counter.record('acc', 'proj', 'chat', 503);
  counter.record('acc', 'proj', 'chat', 503);
  counter.record('acc', null, 'alerts', 502);
  await counter.close();
  const entries = (await store.journal.read(before, 10)).filter((e) => e.kind === 'edge');
  t.equal(entries.length, 1);
  t.match(entries[0], { key: 'edge/edge1', shard: -1, version: 0 });
  t.same(entries[0].events.map((e) => [e.data.project_id, e.data.count]), [['proj', 2], [null, 1]]);
  await projector.apply(entries, store);
  t.equal(metricValue(await readWindow(store, accountScope('acc'), T0, 5), 'api_errors'), 3);
});
