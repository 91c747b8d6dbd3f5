/**
 * A delivery survives the loss of its worker: over NATS with two worker processes, the worker that owns a
 * delivery waiting for its second attempt is killed (SIGKILL); the other takes the shard over, the durable
 * timer fires there, and the receiver gets the second attempt once, with the same event id.
 */
import t from 'tap';
import { natsAvailable, startNats } from './helpers/nats.js';
import { removeDir, startPlatform } from './helpers/platform.js';
import { startCluster } from './helpers/cluster.js';
import { alertsTenant, startReceiver } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';

// Without nats-server this skips locally; with CI=true natsAvailable() throws, so it fails instead.
const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

t.test('SIGKILL the worker that holds a waiting delivery: another worker delivers it once', needsNats, async (t) => {
  const cluster = await startCluster({ workers: 2, leaseTtlMs: 1500, passivateAfterMs: 60_000, env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '0,4000' } });
  const r = await startReceiver({ script: [{ status: 503 }] });
  t.teardown(async () => {
    await r.close();
    await cluster.stop();
  });
  const { api } = await alertsTenant(cluster.edge);
  const e = (await api('POST', '/v1/webhook-endpoints', { name: 'hook', url: r.url, event_types: ['alerts.triggered'] })).body;
  const sent = await api('POST', `/v1/webhook-endpoints/${e.id}/test`);
  t.equal(sent.status, 202);
  await r.waitFor(1);
  // The first attempt's outcome is durable: the delivery now waits for its second attempt.
  await eventually(async () => ((await api('GET', `/v1/webhook-endpoints/${e.id}/deliveries/${sent.body.id}`)).body.attempts?.length === 1 ? true : undefined));
  const owner = (await cluster.ownerOf('delivery', sent.body.id))!;
  owner.child.kill('SIGKILL');
  const got = await r.waitFor(2, 30_000);
  t.equal(got[1].headers['x-service-event-id'], sent.body.event_id, 'the same event id from the other worker');
  const d = await eventually(async () => {
    const x = (await api('GET', `/v1/webhook-endpoints/${e.id}/deliveries/${sent.body.id}`)).body;
    return x.status === 'succeeded' ? x : undefined;
  }, 30_000, 'the delivery to succeed');
  t.same(d.attempts.map((a: any) => a.response_status), [503, 200]);
  t.equal(r.received.length, 2, 'one failed attempt and one success, nothing more');
  const newOwner = await cluster.ownerOf('delivery', sent.body.id);
  t.not(newOwner?.worker, owner.worker, 'on another worker');
});

t.test('no worker reachable: a test event or a redelivery is a 503 in the Alerts shape; endpoints still work', needsNats, async (t) => {
  const nats = await startNats();
  const edge = await startPlatform({ roles: ['edge'], env: { NATS_URL: nats.url, ASK_TIMEOUT_MS: '500', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
  t.teardown(async () => {
    await edge.stop();
    await nats.stop();
    removeDir(edge.dataDir);
  });
  const { api } = await alertsTenant(edge);
  const e = await api('POST', '/v1/webhook-endpoints', { name: 'hook', url: 'http://127.0.0.1:9/hook', event_types: ['alerts.triggered'] });
  t.equal(e.status, 201, 'endpoints need no actor');
  const sent = await api('POST', `/v1/webhook-endpoints/${e.body.id}/test`);
  t.equal(sent.status, 503);
  t.same(sent.body, { message: 'the delivery did not answer in time; retry', errors: [] });
});
