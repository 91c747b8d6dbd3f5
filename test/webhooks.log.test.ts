/**
 * The delivery log's size and cost (an audit): its first page reads what its limit asks, not every delivery of
 * the endpoint; a deleted endpoint's deliveries go with it; finished deliveries past
 * `WEBHOOK_DELIVERY_RETENTION_MS` are swept.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { openStore } from '../store/mod.js';
import { webhookDeliveries, type DeliveryRecord } from '../actors/delivery/mod.js';
import { removeDir, startPlatform, startPlatformWithStore } from './helpers/platform.js';
import { alertsTenant, startReceiver } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';
import { client } from './helpers/http.js';

const BASE = '/v1/webhook-endpoints';

t.test('the store reads a page of the log by its index: at most the page (and one more) of 600 deliveries', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-log-'));
  const store = await openStore({ dataDir: dir });
  t.teardown(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const log = webhookDeliveries(store);
  const at = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();
  const record = (i: number, endpoint: string): DeliveryRecord => ({
    id: `whd_${endpoint}${String(i).padStart(8, '0')}`, account_id: 'acc', project_id: null, endpoint_id: endpoint, event_id: `e${i}`,
    event_type: 'webhook.test', status: 'succeeded', created_at: at(i % 300), updated_at: at(i), next_attempt_at: null,
    attempt_count: 1, attempts: [], snapshot_version: 1,
  });
  // Two deliveries share each creation time (ties are broken by id); another endpoint's are interleaved.
  for (let i = 0; i < 600; i++) await log.insert(record(i, 'whe_a'));
  for (let i = 0; i < 100; i++) await log.insert(record(i, 'whe_b'));
  const all = (await log.find({ endpoint_id: 'whe_a', account_id: 'acc' })).sort((x, y) => (x.created_at === y.created_at ? (x.id < y.id ? -1 : 1) : x.created_at < y.created_at ? 1 : -1));
  // The records the collection reads, counted where it reads them.
  const records = (log as unknown as { env: { records: { get: (k: unknown) => unknown } } }).env.records;
  const get = records.get.bind(records);
  let reads = 0;
  records.get = (k: unknown) => {
    reads++;
    return get(k);
  };
  t.teardown(() => {
    records.get = get;
  });
  const first = await log.page({ endpoint_id: 'whe_a', account_id: 'acc' }, { sort: { created_at: -1 }, limit: 5 });
  t.same(first.items.map((d) => d.id), all.slice(0, 5).map((d) => d.id), 'the newest five, ties by id');
  t.ok(reads <= 7, `the first page read ${reads} of 600 records (the page, the one more, a tie)`);
  reads = 0;
  const one = await log.find({ endpoint_id: 'whe_a', account_id: 'acc' }, { sort: { created_at: -1 }, limit: 1 });
  t.same(one.map((d) => d.id), [all[0].id]);
  t.ok(reads <= 2, `limit 1 read ${reads} records`);
  const second = await log.page({ endpoint_id: 'whe_a', account_id: 'acc' }, { sort: { created_at: -1 }, limit: 5, cursor: first.next! });
  t.same(second.items.map((d) => d.id), all.slice(5, 10).map((d) => d.id), 'the next page follows');
});

t.test('the log over HTTP: first page newest first, a deleted endpoint takes its log, the retention sweeps finished ones', async (t) => {
  const { p, store } = await startPlatformWithStore({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
  let current = p;
  const dataDir = p.dataDir;
  t.teardown(async () => {
    await current.stop();
    await store.close();
    removeDir(dataDir);
  });
  const receiver = await startReceiver();
  t.teardown(() => receiver.close());
  const { key, api } = await alertsTenant(p);
  const create = async () => (await api('POST', BASE, { name: 'hook', url: receiver.url, event_types: ['alerts.triggered'] })).body.id as string;
  const kept = await create();
  const dropped = await create();
  /** A test event to `id`, sent again after the Retry-After of a 429: the route takes a burst of 5, then 1 a second. */
  const testEvent = async (id: string): Promise<string> => {
    for (;;) {
      const r = await api('POST', `${BASE}/${id}/test`);
      if (r.status !== 429) return r.body.id;
      await new Promise((resolve) => setTimeout(resolve, Number(r.headers.get('retry-after')) * 1000));
    }
  };
  const sent: string[] = [];
  for (let i = 0; i < 12; i++) sent.push(await testEvent(kept));
  for (let i = 0; i < 3; i++) await testEvent(dropped);
  await receiver.waitFor(15);
  const list = await eventually(async () => {
    const r = await api('GET', `${BASE}/${kept}/deliveries?limit=100`);
    return r.body.data.length === 12 && r.body.data.every((d: { status: string }) => d.status === 'succeeded') ? r.body.data : undefined;
  }, 20_000, 'the deliveries to succeed');
  const newest = [...list].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? -1 : 1) : a.created_at < b.created_at ? 1 : -1));
  t.same(list.map((d: { id: string }) => d.id), newest.map((d: { id: string }) => d.id), 'newest first');
  t.same(new Set(list.map((d: { id: string }) => d.id)), new Set(sent));
  const page = await api('GET', `${BASE}/${kept}/deliveries?limit=3`);
  t.same(page.body.data.map((d: { id: string }) => d.id), newest.slice(0, 3).map((d: { id: string }) => d.id), 'the first page is the three newest');
  const rest = await api('GET', `${BASE}/${kept}/deliveries?limit=100&cursor=${encodeURIComponent(page.body.next_cursor)}`);
  t.same(rest.body.data.map((d: { id: string }) => d.id), newest.slice(3).map((d: { id: string }) => d.id), 'the next page the rest');

  const log = webhookDeliveries(store);
  store.refresh();
  t.equal(await log.count({ endpoint_id: dropped }), 3, 'the other endpoint has its log');
  t.equal((await api('DELETE', `${BASE}/${dropped}`)).status, 204);
  store.refresh();
  t.equal(await log.count({ endpoint_id: dropped }), 0, 'a deleted endpoint\'s deliveries are deleted with it');

  t.equal(await current.stop(), 0, 'drained');
  await new Promise((r) => setTimeout(r, 1100));
  current = await startPlatform({ dataDir, env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_DELIVERY_RETENTION_MS: '1000' } });
  const again = client(current.edge, { 'x-api-key': key });
  const left = await eventually(async () => {
    const r = await again('GET', `${BASE}/${kept}/deliveries?limit=100`);
    return r.status === 200 && r.body.data.length === 0 ? r.body.data : undefined;
  }, 20_000, 'the finished deliveries to be swept');
  t.same(left, [], 'deliveries finished before the retention are gone from the list');
  const fresh = await again('POST', `${BASE}/${kept}/test`);
  t.equal(fresh.status, 202, 'the endpoint still delivers');
});
