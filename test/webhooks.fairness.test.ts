/**
 * One account's deliveries to names whose lookup never ends do not hold up another account's deliveries
 * (the audit's F1: test events flooding a slow-resolving name took all of libuv's pool threads, and every
 * other account's deliveries that needed a lookup waited behind them). Against a started platform: the only
 * stand-in is the resolver for names under `.stalled.test` (helpers/stalled-dns.ts: each such lookup holds a
 * pool thread, as a getaddrinfo waiting on a silent resolver does, until the test ends); B's receiver is
 * reached by the name `localhost`, through the real resolver. And the test route's per-endpoint limit.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { DIST, startPlatform, removeDir, type Platform } from './helpers/platform.js';
import { alertsTenant, startReceiver, type Receiver } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';

const BASE = '/v1/webhook-endpoints';
const fifo = join(tmpdir(), `stalled-dns-${randomBytes(6).toString('hex')}`);
let p: Platform;
let receiver: Receiver;
t.before(async () => {
  execFileSync('mkfifo', [fifo]);
  const preload = join(DIST, 'test', 'helpers', 'stalled-dns.js');
  p = await startPlatform({
    env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', STALLED_DNS_FIFO: fifo, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${preload}`.trim() },
  });
  receiver = await startReceiver({ host: '127.0.0.1' });
});
t.teardown(async () => {
  // A writer opening the FIFO ends every stalled lookup (read-write: the open itself does not wait for a reader).
  const fd = openSync(fifo, constants.O_RDWR | constants.O_NONBLOCK);
  await receiver.close();
  await p.stop();
  closeSync(fd);
  rmSync(fifo, { force: true });
  removeDir(p.dataDir);
});

t.test("an account's test events to names that never resolve do not hold up another account's deliveries", async (t) => {
  const a = await alertsTenant(p, 'Flooder');
  const b = await alertsTenant(p, 'Bystander');
  // A: several endpoints on distinct stalled names (not one name, which a single lookup would serve), each
  // flooded with test events: more lookups than libuv has pool threads.
  const aEndpoints: string[] = [];
  for (const n of [1, 2, 3]) {
    const e = await a.api('POST', BASE, { name: `dead ${n}`, url: `http://hook${n}.stalled.test/hook`, event_types: ['alerts.triggered'] });
    t.equal(e.status, 201, 'a name that does not resolve now is accepted');
    aEndpoints.push(e.body.id);
  }
  const aSent: string[] = [];
  for (let i = 0; i < 4; i++) {
    for (const id of aEndpoints) {
      const s = await a.api('POST', `${BASE}/${id}/test`);
      t.equal(s.status, 202);
      aSent.push(s.body.id);
    }
  }
  // B: a receiver by name, sent a test event after A's flood.
  const be = await b.api('POST', BASE, { name: 'hook', url: `http://localhost:${receiver.port}/hook`, event_types: ['alerts.triggered'] });
  t.equal(be.status, 201);
  const bs = await b.api('POST', `${BASE}/${be.body.id}/test`);
  t.equal(bs.status, 202);
  const got = await receiver.waitFor(1);
  t.equal(JSON.parse(got[0].body).event_type, 'webhook.test', "B's test event arrived");
  const delivered = await eventually(async () => {
    const r = await b.api('GET', `${BASE}/${be.body.id}/deliveries/${bs.body.id}`);
    return r.body.status === 'succeeded' ? r.body : undefined;
  });
  t.equal(delivered.status, 'succeeded');
  // ...while none of A's has been delivered: its lookups still stall.
  for (const id of aEndpoints) {
    const log = await a.api('GET', `${BASE}/${id}/deliveries`);
    t.equal(log.status, 200);
    t.ok(log.body.data.length > 0 && log.body.data.every((d: { status: string }) => d.status !== 'succeeded'), "A's deliveries are not delivered");
  }
});

t.test('test events past the endpoint\'s bucket are 429 with Retry-After in the family\'s shape', async (t) => {
  const c = await alertsTenant(p, 'Looper');
  const e = await c.api('POST', BASE, { name: 'hook', url: receiver.url, event_types: ['alerts.triggered'] });
  t.equal(e.status, 201);
  // Twenty at once against a burst of 5: most are refused whatever the machine's speed.
  const sent = await Promise.all(Array.from({ length: 20 }, () => c.api('POST', `${BASE}/${e.body.id}/test`)));
  const refused = sent.filter((r) => r.status === 429);
  t.ok(sent.some((r) => r.status === 202), 'the burst is taken');
  t.ok(refused.length > 0, 'past it, refused');
  for (const r of refused) {
    t.equal(r.body.message, 'too many test events for this endpoint; retry after the Retry-After header');
    t.ok(Array.isArray(r.body.errors), '{message, errors}');
    t.ok(Number(r.headers.get('retry-after')) >= 1, 'Retry-After in seconds');
  }
  // Another endpoint's bucket is its own.
  const other = await c.api('POST', BASE, { name: 'other', url: receiver.url, event_types: ['alerts.triggered'] });
  t.equal((await c.api('POST', `${BASE}/${other.body.id}/test`)).status, 202);
});
