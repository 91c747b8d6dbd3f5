/**
 * `dispatchWebhookEvent`, the API the alert rules call, on an in-process runtime over a real store, with
 * real receivers on loopback: subscribed and enabled endpoints of the account only, one delivery per endpoint
 * however often (and however concurrently) an event is dispatched; and the checks a delivery makes at
 * connect time when private destinations are not allowed (names that resolve to loopback, IPv6 forms).
 */
import t, { type Test } from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { createHmac } from 'node:crypto';
import { builtinKinds, startRuntime, type Runtime } from '../actors/mod.js';
import {
  deliveryId, deliveryKind, dispatchWebhookEvent, newSigningSecret, SecretBox, webhookDeliveries, webhookEndpoints, type WebhookEndpointRecord,
} from '../actors/delivery/mod.js';
import { attemptEffect } from '../actors/delivery/attempt.js';
import { deliveryLookups, guardedLookup, PrivateDestinationError } from '../actors/delivery/destination.js';
import { openStore, type Store } from '../store/mod.js';
import { removeDir } from './helpers/platform.js';
import { startReceiver, type Receiver } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';

let dir: string;
let store: Store;
let runtime: Runtime;
let secrets: SecretBox;
const receivers: Receiver[] = [];
t.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sb-dispatch-'));
  store = await openStore({ dataDir: dir });
  secrets = await SecretBox.open(dir);
  const kinds = builtinKinds([deliveryKind({ store, secrets, allowPrivate: true, schedule: [0, 50] })]);
  runtime = await startRuntime({ store, kinds, worker: true, shardCount: 8, leaseTtlMs: 3000, passivateAfterMs: 60_000, askTimeoutMs: 5000 });
});
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await runtime.stop();
  await store.close();
  removeDir(dir);
});

let n = 0;
async function addEndpoint(accountId: string, url: string, o: Partial<WebhookEndpointRecord> = {}): Promise<WebhookEndpointRecord> {
  const now = new Date().toISOString();
  const e: WebhookEndpointRecord = {
    id: `whe_t${++n}`, account_id: accountId, slot: n, name: `e${n}`, url, event_types: ['alerts.triggered', 'alerts.resolved'], headers: {}, timeout_ms: 5000, enabled: true,
    secret: secrets.seal(newSigningSecret()), created_at: now, updated_at: now, ...o,
  };
  await webhookEndpoints(store).insert(e);
  return e;
}
async function receiver() {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}
const alert = (id: string, type: 'alerts.triggered' | 'alerts.resolved' = 'alerts.triggered', account = 'acc_1') => ({
  id,
  type,
  account_id: account,
  project_id: 'proj_1',
  body: { event_type: type, alert: { id: 'ar_1', name: 'errors', project_id: 'proj_1', metric: 'function_errors', operator: '>=', threshold_value: 1, current_value: 3, previous_state: 'ok', triggered_at: new Date().toISOString() } },
});

t.test('dispatch: each subscribed, enabled endpoint of the account gets the event once, however often it is dispatched', async (t) => {
  const [a, b, resolvedOnly, disabled, otherAccount] = await Promise.all([receiver(), receiver(), receiver(), receiver(), receiver()]);
  const ea = await addEndpoint('acc_1', a.url);
  const eb = await addEndpoint('acc_1', b.url, { event_types: ['alerts.triggered'] });
  await addEndpoint('acc_1', resolvedOnly.url, { event_types: ['alerts.resolved'] });
  await addEndpoint('acc_1', disabled.url, { enabled: false });
  await addEndpoint('acc_2', otherAccount.url);
  const deps = { store, client: runtime.client };
  const first = await dispatchWebhookEvent(deps, alert('evt_alert_1'));
  t.same(first.map((d) => d.endpoint_id).sort(), [ea.id, eb.id].sort());
  for (const d of first) t.equal(d.delivery_id, deliveryId(d.endpoint_id, 'evt_alert_1'));
  // Retried callers, one after another and all at once.
  const again = await dispatchWebhookEvent(deps, alert('evt_alert_1'));
  await Promise.all([...Array(5)].map(() => dispatchWebhookEvent(deps, alert('evt_alert_1'))));
  t.same(again, first, 'the same deliveries');
  const [got] = await a.waitFor(1);
  await b.waitFor(1);
  t.equal(got.headers['x-service-event-id'], 'evt_alert_1');
  t.same(JSON.parse(got.body).alert.metric, 'function_errors');
  const log = webhookDeliveries(store);
  for (const d of first) await eventually(async () => ((await log.get(d.delivery_id))?.status === 'succeeded' ? true : undefined));
  t.equal(a.received.length, 1, 'endpoint a: once');
  t.equal(b.received.length, 1, 'endpoint b: once');
  t.equal(resolvedOnly.received.length + disabled.received.length + otherAccount.received.length, 0, 'not subscribed, disabled, other account: nothing');

  // Each step's emitted events are journaled with it, every one naming account and project.
  const entries = await store.journal.ofActor(`delivery/${first[0].delivery_id}`);
  const events = entries.flatMap((e) => e.events);
  t.same(events.map((e) => e.type), ['delivery.attempted', 'delivery.succeeded']);
  for (const e of events) t.match(e.data, { account_id: 'acc_1', project_id: 'proj_1', event_id: 'evt_alert_1', delivery_id: first[0].delivery_id });
  t.match(events[0].data, { attempt: 1, status: 200, error: null });

  const resolved = await dispatchWebhookEvent(deps, alert('evt_alert_2', 'alerts.resolved'));
  t.equal(resolved.length, 2, 'alerts.resolved: endpoints a and resolved-only');
  await resolvedOnly.waitFor(1);
  t.same(await dispatchWebhookEvent(deps, alert('evt_x', 'alerts.triggered', 'acc_none')), [], 'an account without endpoints: nothing');
});

t.test('dispatch: malformed event ids and bodies are refused before anything starts', async (t) => {
  const deps = { store, client: runtime.client };
  for (const id of ['', 'has space', 'line\nbreak', 'x'.repeat(129), 'é']) await t.rejects(dispatchWebhookEvent(deps, alert(id)), TypeError, JSON.stringify(id));
  await t.rejects(dispatchWebhookEvent(deps, { ...alert('evt_big'), body: { pad: 'x'.repeat(300 * 1024) } }), TypeError);
  await t.rejects(dispatchWebhookEvent(deps, { ...alert('evt_null'), body: null as never }), TypeError);
});

t.test('at delivery, without private URLs: names resolving to loopback and IPv6 loopback forms are not connected to', async (t) => {
  const r = await receiver();
  const effect = attemptEffect({ store, secrets, allowPrivate: false });
  for (const url of [`http://localhost:${r.port}/hook`, `http://127.0.0.1:${r.port}/hook`, `http://[::1]:${r.port}/hook`, `http://[::ffff:127.0.0.1]:${r.port}/hook`, `http://0.0.0.0:${r.port}/hook`]) {
    const e = await addEndpoint('acc_3', url);
    const res = await effect({ deliveryId: 'whd_x', endpointId: e.id, accountId: 'acc_3', projectId: null, eventId: 'evt_1', eventType: 'alerts.triggered', body: '{}', series: 1, n: 1 }).done;
    t.equal(res.error, 'private_address', url);
    t.equal(res.status, null);
  }
  t.equal(r.received.length, 0, 'the receiver got nothing');
  const allowed = attemptEffect({ store, secrets, allowPrivate: true });
  const e = await addEndpoint('acc_3', `http://localhost:${r.port}/hook`);
  const ok = await allowed({ deliveryId: 'whd_x', endpointId: e.id, accountId: 'acc_3', projectId: null, eventId: 'evt_1', eventType: 'alerts.triggered', body: '{}', series: 1, n: 1 }).done;
  t.equal(ok.status, 200, 'allowed when WEBHOOK_ALLOW_PRIVATE_URLS is on');
  const gone = await allowed({ deliveryId: 'whd_x', endpointId: 'whe_missing', accountId: 'acc_3', projectId: null, eventId: 'evt_1', eventType: 'alerts.triggered', body: '{}', series: 1, n: 1 }).done;
  t.equal(gone.error, 'endpoint_deleted');
  const foreign = await allowed({ deliveryId: 'whd_x', endpointId: e.id, accountId: 'acc_other', projectId: null, eventId: 'evt_1', eventType: 'alerts.triggered', body: '{}', series: 1, n: 1 }).done;
  t.equal(foreign.error, 'endpoint_deleted', "another account's endpoint is not used");
});

/**
 * A thread that opens the same store and, when told, sets fields of an endpoint (as the edge thread does for a
 * rotate-secret or a PATCH). `changed()` runs it inside one synchronous stretch of this thread, as one busy turn
 * of the event loop: a read of the endpoint (which begins this thread's read snapshot), then the other
 * thread's commit; what the caller does next still falls in that turn, before lmdb-js would renew the snapshot.
 */
const EDITOR = `
const { workerData, parentPort } = require('node:worker_threads');
(async () => {
  const { openStore } = await import(workerData.storeModule);
  const { webhookEndpoints } = await import(workerData.endpointsModule);
  const store = await openStore({ dataDir: workerData.dataDir });
  const flags = new Int32Array(workerData.flags);
  parentPort.postMessage('ready');
  Atomics.wait(flags, 0, 0);
  await webhookEndpoints(store).update({ id: workerData.id }, { $set: workerData.set });
  Atomics.store(flags, 1, 1);
  Atomics.notify(flags, 1);
})();
`;
async function editorThread(t: Test, id: string, set: Partial<WebhookEndpointRecord>) {
  const flags = new Int32Array(new SharedArrayBuffer(8));
  const editor = new Worker(EDITOR, {
    eval: true,
    workerData: {
      dataDir: dir, id, set, flags: flags.buffer,
      storeModule: new URL('../store/mod.js', import.meta.url).href, endpointsModule: new URL('../actors/delivery/endpoints.js', import.meta.url).href,
    },
  });
  t.teardown(() => editor.terminate());
  await new Promise((resolve) => editor.once('message', resolve));
  return {
    /** Reads the endpoint, lets the other thread commit, and answers what this thread read before it. */
    changed(): Promise<WebhookEndpointRecord | null> {
      const before = webhookEndpoints(store).get(id);
      Atomics.store(flags, 0, 1);
      Atomics.notify(flags, 0);
      if (Atomics.wait(flags, 1, 0, 10_000) !== 'ok') throw new Error('the other thread did not commit');
      return before;
    },
  };
}

t.test('an attempt signs with the secret another thread rotated a moment before, in the same turn of this thread', async (t) => {
  const r = await receiver();
  const e = await addEndpoint('acc_5', r.url);
  const rotated = newSigningSecret();
  const editor = await editorThread(t, e.id, { secret: secrets.seal(rotated) });
  const effect = attemptEffect({ store, secrets, allowPrivate: true });
  const before = editor.changed();
  const attempt = effect({ deliveryId: 'whd_r', endpointId: e.id, accountId: 'acc_5', projectId: null, eventId: 'evt_r', eventType: 'webhook.test', body: '{}', series: 1, n: 1 }).done;
  t.same((await before)?.secret, e.secret, 'this thread had read the old secret');
  t.equal((await attempt).status, 200);
  const [got] = await r.waitFor(1);
  const expected = (secret: string) => createHmac('sha256', secret).update(`${got.headers['x-service-timestamp']}.${got.body}`).digest('hex');
  t.equal(got.headers['x-service-signature'], expected(rotated), 'signed with the rotated secret');
});

t.test('dispatch: an endpoint another thread enabled a moment before, in the same turn of this thread, gets the event', async (t) => {
  const r = await receiver();
  const e = await addEndpoint('acc_6', r.url, { enabled: false });
  const editor = await editorThread(t, e.id, { enabled: true });
  const before = editor.changed();
  const dispatched = dispatchWebhookEvent({ store, client: runtime.client }, alert('evt_enabled', 'alerts.triggered', 'acc_6'));
  t.equal((await before)?.enabled, false, 'this thread had read it disabled');
  t.same((await dispatched).map((d) => d.endpoint_id), [e.id]);
  await r.waitFor(1);
});

t.test('the connect-time lookup refuses a name with any blocked answer and hands over only what it checked', async (t) => {
  const lookup = (allow: boolean, host: string, options: { family?: number; all?: boolean }) =>
    new Promise<{ err: Error | null; address: unknown; family?: number }>((resolve) => guardedLookup(allow, (name) => deliveryLookups.lookup(name, 'acct'))(host, options, (err, address, family) => resolve({ err, address, family })));
  const refused = await lookup(false, 'localhost', {});
  t.ok(refused.err instanceof PrivateDestinationError, 'localhost refused');
  const refusedAll = await lookup(false, 'localhost', { all: true });
  t.ok(refusedAll.err instanceof PrivateDestinationError, 'also when every address is asked for');
  const allowed = await lookup(true, 'localhost', { family: 4 });
  t.equal(allowed.address, '127.0.0.1');
  t.equal(allowed.family, 4);
  const all = await lookup(true, 'localhost', { all: true });
  t.ok(Array.isArray(all.address) && (all.address as Array<{ address: string }>).every((a) => ['127.0.0.1', '::1'].includes(a.address)));
  const missing = await lookup(true, 'no-such-host.invalid', {});
  t.ok(missing.err && !(missing.err instanceof PrivateDestinationError), 'an unknown name is a network error');
});

t.test('a runtime that stops during an attempt: the next one wakes the delivery by its watchdog and makes the attempt again', async (t) => {
  const dir2 = mkdtempSync(join(tmpdir(), 'sb-dispatch-crash-'));
  const store2 = await openStore({ dataDir: dir2 });
  const secrets2 = await SecretBox.open(dir2);
  const r = await startReceiver({ script: [{ delayMs: 4000, status: 200 }] });
  const start = () =>
    startRuntime({ store: store2, kinds: builtinKinds([deliveryKind({ store: store2, secrets: secrets2, allowPrivate: true, schedule: [0, 50], attemptWatchdogMs: 1000 })]), worker: true, shardCount: 8, leaseTtlMs: 3000, passivateAfterMs: 60_000, askTimeoutMs: 5000 });
  let rt = await start();
  t.teardown(async () => {
    await r.close();
    await rt.stop();
    await store2.close();
    removeDir(dir2);
  });
  const now = new Date().toISOString();
  await webhookEndpoints(store2).insert({ id: 'whe_crash', account_id: 'acc_c', slot: 0, name: 'c', url: r.url, event_types: ['alerts.triggered'], headers: {}, timeout_ms: 30_000, enabled: true, secret: secrets2.seal(newSigningSecret()), created_at: now, updated_at: now });
  const [d] = await dispatchWebhookEvent({ store: store2, client: rt.client }, alert('evt_crash', 'alerts.triggered', 'acc_c'));
  await r.waitFor(1);
  await rt.stop(); // the attempt is in flight: its answer never reaches this runtime
  t.equal((await webhookDeliveries(store2).get(d.delivery_id))?.status, 'delivering', 'stored while the attempt was in flight');
  rt = await start();
  const got = await r.waitFor(2, 20_000);
  t.equal(got[1].headers['x-service-event-id'], 'evt_crash', 'the attempt is made again, same event id');
  const rec = await eventually(async () => {
    const x = await webhookDeliveries(store2).get(d.delivery_id);
    return x?.status === 'succeeded' ? x : undefined;
  });
  t.same(rec.attempts.map((a) => a.response_status), [200]);
});
