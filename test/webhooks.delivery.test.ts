/**
 * Deliveries end to end against a started platform and real receivers on loopback (WEBHOOK_ALLOW_PRIVATE_URLS
 * is on, as it must be for loopback receivers; a short WEBHOOK_RETRY_SCHEDULE_MS): both signatures verify,
 * retries follow the rules, Retry-After is honoured, the log shows every attempt, redelivery and the test
 * event, rotate-secret, and a restart between attempts.
 */
import t from 'tap';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { startPlatform, removeDir, type Platform } from './helpers/platform.js';
import { alertsTenant, startReceiver, type Received, type Receiver } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';
import { client } from './helpers/http.js';

const SCHEDULE = '0,50,50,50';
let p: Platform;
const receivers: Receiver[] = [];
t.before(async () => {
  p = await startPlatform({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_RETRY_SCHEDULE_MS: SCHEDULE } });
});
t.teardown(async () => {
  for (const r of receivers) await r.close();
  await p.stop();
  removeDir(p.dataDir);
});

const BASE = '/v1/webhook-endpoints';
async function receiver(...args: Parameters<typeof startReceiver>) {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}

/** Verifies `X-Service-Signature` the way docs/webhooks.md shows. */
function serviceSignatureValid(secret: string, got: Received): boolean {
  const ts = String(got.headers['x-service-timestamp']);
  const expected = createHmac('sha256', secret).update(`${ts}.${got.body}`).digest();
  const given = Buffer.from(String(got.headers['x-service-signature']), 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected) && Math.abs(Date.now() / 1000 - Number(ts)) <= 300;
}
function standardSignatureValid(secret: string, got: Received): boolean {
  try {
    new Webhook(secret).verify(got.body, got.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

async function endpoint(api: Awaited<ReturnType<typeof alertsTenant>>['api'], url: string, extra: Record<string, unknown> = {}) {
  const r = await api('POST', BASE, { name: 'hook', url, event_types: ['alerts.triggered', 'alerts.resolved'], ...extra });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${r.text}`);
  return r.body as { id: string; signing_secret: string };
}

/** The delivery once it is final (succeeded or failed). */
async function settled(api: Awaited<ReturnType<typeof alertsTenant>>['api'], endpointId: string, deliveryId: string) {
  return eventually(async () => {
    const r = await api('GET', `${BASE}/${endpointId}/deliveries/${deliveryId}`);
    return r.status === 200 && (r.body.status === 'succeeded' || r.body.status === 'failed') ? r.body : undefined;
  }, 20_000, `delivery ${deliveryId} to settle`);
}

t.test('a test event: POST with both signatures valid, the event id in both headers, custom headers, JSON body', async (t) => {
  const { api } = await alertsTenant(p);
  const r = await receiver();
  const e = await endpoint(api, r.url, { headers: { Authorization: 'Bearer abc', 'X-Team': 'ops' } });
  const sent = await api('POST', `${BASE}/${e.id}/test`);
  t.equal(sent.status, 202);
  t.match(sent.body.id, /^whd_[0-9a-f]{32}$/);
  t.equal(sent.body.event_type, 'webhook.test');
  const [got] = await r.waitFor(1);
  t.equal(got.method, 'POST');
  t.equal(got.path, '/hook');
  t.equal(got.headers['content-type'], 'application/json');
  t.equal(got.headers['x-service-event-id'], sent.body.event_id);
  t.equal(got.headers['webhook-id'], sent.body.event_id);
  t.equal(got.headers['webhook-timestamp'], got.headers['x-service-timestamp']);
  t.match(String(got.headers['x-service-signature']), /^[0-9a-f]{64}$/);
  t.match(String(got.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);
  t.equal(got.headers.authorization, 'Bearer abc', 'custom headers are sent');
  t.equal(got.headers['x-team'], 'ops');
  t.ok(serviceSignatureValid(e.signing_secret, got), 'X-Service-Signature verifies (node crypto)');
  t.ok(standardSignatureValid(e.signing_secret, got), 'webhook-signature verifies (standardwebhooks)');
  const body = JSON.parse(got.body);
  t.same(body.event_type, 'webhook.test');
  t.same(body.endpoint, { id: e.id, name: 'hook' });
  const d = await settled(api, e.id, sent.body.id);
  t.equal(d.status, 'succeeded');
  t.equal(d.attempts.length, 1);
  t.equal(d.attempts[0].response_status, 200);
  t.ok(d.attempts[0].duration_ms >= 0);
  const log = await api('GET', `${BASE}/${e.id}/deliveries`);
  t.same(log.body.data.map((x: any) => x.id), [sent.body.id]);
  t.equal(log.body.next_cursor, null);
});

t.test('fails twice (500) then succeeds: three attempts with the same event id and body, all in the log', async (t) => {
  const { api } = await alertsTenant(p);
  const r = await receiver({ script: [{ status: 500 }, { status: 503 }] });
  const e = await endpoint(api, r.url);
  const sent = await api('POST', `${BASE}/${e.id}/test`);
  const got = await r.waitFor(3);
  t.same(new Set(got.map((g) => g.headers['x-service-event-id'])), new Set([sent.body.event_id]), 'one event id');
  t.same(new Set(got.map((g) => g.body)).size, 1, 'the same bytes each time');
  for (const g of got) t.ok(serviceSignatureValid(e.signing_secret, g) && standardSignatureValid(e.signing_secret, g), 'each attempt is signed');
  const d = await settled(api, e.id, sent.body.id);
  t.equal(d.status, 'succeeded');
  t.same(d.attempts.map((a: any) => [a.series, a.attempt, a.response_status]), [[1, 1, 500], [1, 2, 503], [1, 3, 200]]);
  t.ok(d.attempts[0].next_attempt_at && d.attempts[2].next_attempt_at === null);
  t.equal(d.attempt_count, 3);
  t.equal(r.received.length, 3, 'nothing after the success');
});

t.test('a 400 is not retried; 408 and timeouts and dropped connections are', async (t) => {
  const { api } = await alertsTenant(p);
  const bad = await receiver({ fallback: { status: 400 } });
  const e1 = await endpoint(api, bad.url);
  const s1 = await api('POST', `${BASE}/${e1.id}/test`);
  const d1 = await settled(api, e1.id, s1.body.id);
  t.equal(d1.status, 'failed');
  t.same(d1.attempts.map((a: any) => a.response_status), [400]);
  t.equal(bad.received.length, 1, 'one request only');

  const flaky = await receiver({ script: [{ status: 408 }, 'drop', { delayMs: 1500, status: 200 }] });
  const e2 = await endpoint(api, flaky.url, { timeout_ms: 1000 });
  const s2 = await api('POST', `${BASE}/${e2.id}/test`);
  const d2 = await settled(api, e2.id, s2.body.id);
  t.equal(d2.status, 'succeeded');
  t.same(d2.attempts.map((a: any) => [a.response_status, a.error]), [[408, null], [null, 'network'], [null, 'timeout'], [200, null]]);

  // A status that has come stands when its body never ends: a 2xx that stalls is a success, sent once; a 503
  // that stalls is retried as a 503, not as a timeout.
  const stalling = await receiver({ script: [{ stall: true, status: 503 }, { stall: true, status: 200 }] });
  const e4 = await endpoint(api, stalling.url, { timeout_ms: 1000 });
  const s4 = await api('POST', `${BASE}/${e4.id}/test`);
  const d4 = await settled(api, e4.id, s4.body.id);
  t.equal(d4.status, 'succeeded', 'a 2xx whose body stalls succeeds');
  t.same(d4.attempts.map((a: any) => [a.response_status, a.error]), [[503, null], [200, null]]);
  t.equal(stalling.received.length, 2, 'not sent again after the 2xx');

  const down = await receiver({ fallback: { status: 502 } });
  const e3 = await endpoint(api, down.url);
  const s3 = await api('POST', `${BASE}/${e3.id}/test`);
  const d3 = await settled(api, e3.id, s3.body.id);
  t.equal(d3.status, 'failed', 'the schedule runs out');
  t.equal(d3.attempts.length, SCHEDULE.split(',').length, 'one attempt per scheduled delay');
  t.equal(down.received.length, SCHEDULE.split(',').length);
});

t.test('429 with Retry-After: the next attempt waits that long, not the schedule', async (t) => {
  const { api } = await alertsTenant(p);
  const r = await receiver({ script: [{ status: 429, headers: { 'retry-after': '1' } }] });
  const e = await endpoint(api, r.url);
  const sent = await api('POST', `${BASE}/${e.id}/test`);
  const d = await settled(api, e.id, sent.body.id);
  t.equal(d.status, 'succeeded');
  const [first, second] = r.received;
  t.ok(second.at - first.at >= 1000, `the second attempt came ${second.at - first.at} ms after the first (Retry-After: 1 s, schedule 50 ms)`);
  t.ok(Date.parse(d.attempts[0].next_attempt_at) - Date.parse(d.attempts[0].ended_at) >= 1000, 'the log shows the later deadline');
});

t.test('redelivery: a new series with the same event id; the log pages newest first', async (t) => {
  const { api } = await alertsTenant(p);
  const r = await receiver();
  const e = await endpoint(api, r.url);
  const sent = await api('POST', `${BASE}/${e.id}/test`);
  await settled(api, e.id, sent.body.id);
  const again = await api('POST', `${BASE}/${e.id}/deliveries/${sent.body.id}/redeliver`);
  t.equal(again.status, 202);
  t.equal(again.body.id, sent.body.id);
  const got = await r.waitFor(2);
  t.equal(got[1].headers['x-service-event-id'], sent.body.event_id, 'same event id');
  t.equal(got[1].body, got[0].body, 'same body');
  const d = await eventually(async () => {
    const x = (await api('GET', `${BASE}/${e.id}/deliveries/${sent.body.id}`)).body;
    return x.attempts.length === 2 && x.status === 'succeeded' ? x : undefined;
  });
  t.same(d.attempts.map((a: any) => [a.series, a.attempt, a.response_status]), [[1, 1, 200], [2, 1, 200]]);

  const second = await api('POST', `${BASE}/${e.id}/test`);
  await settled(api, e.id, second.body.id);
  const page1 = await api('GET', `${BASE}/${e.id}/deliveries?limit=1`);
  t.same(page1.body.data.map((x: any) => x.id), [second.body.id], 'newest first');
  t.type(page1.body.next_cursor, 'string');
  const page2 = await api('GET', `${BASE}/${e.id}/deliveries?limit=1&cursor=${encodeURIComponent(page1.body.next_cursor)}`);
  t.same(page2.body.data.map((x: any) => x.id), [sent.body.id]);
  t.equal(page2.body.next_cursor, null);
  const byEvent = await api('GET', `${BASE}/${e.id}/deliveries?event_id=${sent.body.event_id}`);
  t.same(byEvent.body.data.map((x: any) => x.id), [sent.body.id]);

  t.equal((await api('GET', `${BASE}/${e.id}/deliveries/whd_00000000000000000000000000000000`)).status, 404);
  t.equal((await api('POST', `${BASE}/${e.id}/deliveries/whd_00000000000000000000000000000000/redeliver`)).status, 404);
  const otherEndpoint = await endpoint(api, r.url);
  t.equal((await api('GET', `${BASE}/${otherEndpoint.id}/deliveries/${sent.body.id}`)).status, 404, "another endpoint's delivery");
  // A cursor walks the log it was issued for: another endpoint's, or another event filter's, is not one.
  for (const path of [`${otherEndpoint.id}/deliveries?cursor=`, `${e.id}/deliveries?event_id=${sent.body.event_id}&cursor=`]) {
    const foreign = await api('GET', `${BASE}/${path}${encodeURIComponent(page1.body.next_cursor)}`);
    t.equal(foreign.status, 400, path);
    t.same(foreign.body.errors, [{ field: 'cursor', message: 'malformed cursor' }]);
  }
  await api('PATCH', `${BASE}/${e.id}`, { enabled: false });
  const disabled = await api('POST', `${BASE}/${e.id}/deliveries/${sent.body.id}/redeliver`);
  t.equal(disabled.status, 409);
  t.same(disabled.body.errors, [{ field: 'enabled', message: 'the webhook endpoint is disabled' }]);
  t.equal((await api('POST', `${BASE}/${e.id}/test`)).status, 409, 'no test event to a disabled endpoint');
});

t.test('rotate-secret: the next deliveries verify with the new secret only', async (t) => {
  const { api } = await alertsTenant(p);
  const r = await receiver();
  const e = await endpoint(api, r.url);
  await api('POST', `${BASE}/${e.id}/test`);
  const [before] = await r.waitFor(1);
  t.ok(serviceSignatureValid(e.signing_secret, before) && standardSignatureValid(e.signing_secret, before));
  const rotated = (await api('POST', `${BASE}/${e.id}/rotate-secret`)).body.signing_secret as string;
  await api('POST', `${BASE}/${e.id}/test`);
  const [, after] = await r.waitFor(2);
  t.ok(serviceSignatureValid(rotated, after), 'X-Service-Signature verifies with the new secret');
  t.ok(standardSignatureValid(rotated, after), 'webhook-signature verifies with the new secret');
  t.notOk(serviceSignatureValid(e.signing_secret, after), 'the old secret no longer verifies X-Service-Signature');
  t.notOk(standardSignatureValid(e.signing_secret, after), 'the old secret no longer verifies webhook-signature');
});

t.test('a delivery to an endpoint disabled while it waits stops at its next attempt', async (t) => {
  const { api } = await alertsTenant(p);
  // Retry-After holds the second attempt back long enough to disable the endpoint first.
  const r = await receiver({ script: [{ status: 429, headers: { 'retry-after': '3' } }] });
  const e = await endpoint(api, r.url);
  const sent = await api('POST', `${BASE}/${e.id}/test`);
  await r.waitFor(1);
  t.equal((await api('PATCH', `${BASE}/${e.id}`, { enabled: false })).status, 200);
  const d = await settled(api, e.id, sent.body.id);
  t.equal(d.status, 'failed');
  t.same(d.attempts.map((a: any) => [a.response_status, a.error]), [[429, null], [null, 'endpoint_disabled']]);
  t.equal(r.received.length, 1, 'nothing sent to the disabled endpoint');
});

t.test('a platform restart between attempts: the delivery resumes and arrives once, same event id', async (t) => {
  const env = { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '0,4000' };
  const q = await startPlatform({ env });
  t.teardown(async () => {
    await q.stop();
    removeDir(q.dataDir);
  });
  const { api, key } = await alertsTenant(q);
  const r = await receiver({ script: [{ status: 500 }] });
  const e = await endpoint(api, r.url);
  const sent = await api('POST', `${BASE}/${e.id}/test`);
  await r.waitFor(1);
  t.equal(await q.stop(), 0, 'stopped while the delivery waits for its second attempt');
  const q2 = await startPlatform({ dataDir: q.dataDir, env: { ...env, OPERATOR_TOKEN: q.operatorToken } });
  t.teardown(async () => {
    await q2.stop();
  });
  const got = await r.waitFor(2, 30_000);
  t.equal(got[1].headers['x-service-event-id'], sent.body.event_id, 'the same event id after the restart');
  const api2 = client(q2.edge, { 'x-api-key': key });
  const d = await settled(api2, e.id, sent.body.id);
  t.equal(d.status, 'succeeded');
  t.same(d.attempts.map((a: any) => a.response_status), [500, 200]);
  t.equal(r.received.length, 2, 'delivered once: one failed attempt and one success');
});
