import t from 'tap';
import { natsAvailable } from './helpers/nats.js';
import { startCluster, type NatsCluster } from './helpers/cluster.js';
import { http } from './helpers/http.js';
import { readSse } from './helpers/sse.js';
import { waitForProjections } from './helpers/projections.js';

// The inspector over NATS: an edge process and two worker processes. The edge streams the steps of actors
// hosted by either worker (it tails the shared journal), and the stream goes on when the owner dies and
// another worker takes the actor over. Without nats-server this skips locally; with CI=true
// natsAvailable() throws, so it fails instead.
const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

t.test('SSE of actors on two worker processes, across a failover', needsNats, async (t) => {
  const cluster: NatsCluster = await startCluster({ workers: 2, leaseTtlMs: 1500, passivateAfterMs: 60_000 });
  t.teardown(() => cluster.stop());
  const token = cluster.edge.operatorToken;
  const auth = { authorization: `Bearer ${token}` };
  const inc = (id: string) => cluster.client.ask<{ count: number }>('counter', id, { type: 'INC' }, { timeoutMs: 60_000 });

  // One counter on each worker.
  const byWorker = new Map<string, string>();
  for (let i = 0; byWorker.size < 2 && i < 200; i++) {
    const id = `inspect-${i}`;
    const owner = (await cluster.ownerOf('counter', id))!;
    if (!byWorker.has(owner.worker)) byWorker.set(owner.worker, id);
  }
  t.equal(byWorker.size, 2, 'an actor on each worker');

  for (const [worker, id] of byWorker) {
    await inc(id);
    const a = await http(cluster.edge.edge, 'GET', `/admin/v1/inspector/actors/counter/${id}`, { headers: auth });
    t.equal(a.status, 200);
    t.equal(a.body.placement.owner, worker, `${id}: the owner worker is shown`);
    t.ok(a.body.placement.fence > 0, 'with its fence');
    t.match(a.body.journal, [{ version: 1, value: 'idle', events: [{ type: 'counter.incremented', data: { count: 1 } }] }], 'the journal step');

    const sse = readSse(`${cluster.edge.edge}/admin/v1/inspector/actors/counter/${id}/events`, auth);
    t.equal((await sse.next((e) => e.event === 'snapshot')).data.version, 1);
    for (let n = 2; n <= 4; n++) await inc(id);
    for (let n = 2; n <= 4; n++) {
      const step = await sse.next((e) => e.event === 'step');
      t.equal(step.data.version, n, `${id}: step ${n} streamed from ${worker}`);
      t.equal(step.id, String(n), 'its SSE id is the version');
      t.same(step.data.events, [{ type: 'counter.incremented', data: { count: n } }]);
    }
    sse.close();
  }

  // The owner of one of them dies: the stream goes on with the steps the new owner commits.
  const [victimId, id] = [...byWorker.entries()][0];
  const sse = readSse(`${cluster.edge.edge}/admin/v1/inspector/actors/counter/${id}/events`, auth);
  t.equal((await sse.next((e) => e.event === 'snapshot')).data.version, 4);
  cluster.workers.find((w) => w.worker === victimId)!.child.kill('SIGKILL');
  for (let n = 5; n <= 6; n++) await inc(id);
  for (let n = 5; n <= 6; n++) {
    const step = await sse.next((e) => e.event === 'step');
    t.equal(step.data.version, n, `step ${n} after the failover`);
    t.same(step.data.events, [{ type: 'counter.incremented', data: { count: n } }]);
  }
  sse.close();
  const after = await http(cluster.edge.edge, 'GET', `/admin/v1/inspector/actors/counter/${id}`, { headers: auth });
  t.not(after.body.placement.owner, victimId, 'now owned by the other worker');
  t.ok(after.body.placement.owner, 'which is shown');

  await waitForProjections(cluster.edge);
  const fleet = await http(cluster.edge.edge, 'GET', '/admin/v1/inspector/fleet', { headers: auth });
  t.ok(fleet.body.kinds.counter.states.idle >= 2, 'the fleet counts them');
  t.equal((await http(cluster.edge.edge, 'GET', '/admin/v1/inspector/fleet')).status, 401, '401 without the token');
});
