/**
 * The pieces a delivery is made of, checked alone: the blocked-address rules (every IPv4 and IPv6 form),
 * the two signatures (the Standard Webhooks library and node's crypto verify what we send, for any body and
 * event id), the sealed secrets, and `Retry-After`.
 */
import t from 'tap';
import fc from 'fast-check';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { deliveryId, EVENT_ID, isBlockedAddress, newSigningSecret, SecretBox, signatureHeaders } from '../actors/delivery/mod.js';
import { retryAfter } from '../actors/delivery/attempt.js';
import { removeDir } from './helpers/platform.js';

t.test('blocked addresses: loopback, private, link-local, CGNAT, ULA, metadata and reserved, in every form', async (t) => {
  const blocked = [
    '127.0.0.1', '127.255.255.254', '0.0.0.0', '0.1.2.3', '10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.255', '192.168.1.1',
    '169.254.169.254', '169.254.0.1', '100.64.0.1', '100.127.255.255', '192.0.0.8', '192.0.2.1', '198.18.0.1', '198.51.100.1', '203.0.113.9',
    '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255',
    '::1', '::', '0:0:0:0:0:0:0:1', '[::1]', 'fe80::1', 'fe80::1%eth0', 'febf::1', 'fc00::1', 'fd12:3456:789a::1', 'ff02::1', 'fec0::1', '2001:db8::1', '100::1',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '[::ffff:7f00:1]', '::ffff:10.0.0.1', '::ffff:169.254.169.254', '::ffff:a9fe:a9fe', '::127.0.0.1', '::ffff:0:127.0.0.1', '::ffff:0.0.0.0',
    '64:ff9b::7f00:1', '64:ff9b::10.1.1.1', '64:ff9b:1::1', '2002:7f00:1::', '2002:c0a8:101::1', '2001:0:4136:e378:8000:63bf:80ff:fffe', '::10.0.0.1',
    'localhost', 'not-an-ip', '',
  ];
  for (const ip of blocked) t.ok(isBlockedAddress(ip), `${ip || '(empty)'} is blocked`);
  const allowed = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '172.15.255.255', '100.128.0.1', '100.63.255.255', '169.253.0.1', '192.169.0.1',
    '2606:4700:4700::1111', '2a00:1450:4001::200e', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '2001:0:4136:e378:8000:63bf:f7f7:f7f7'];
  for (const ip of allowed) t.notOk(isBlockedAddress(ip), `${ip} is allowed`);
});

t.test('blocked addresses: any address inside a private IPv4 range, in IPv4 and every IPv6 form', async (t) => {
  const ranges: Array<[number, number]> = [[0x7f000000, 8], [0x0a000000, 8], [0xac100000, 12], [0xc0a80000, 16], [0xa9fe0000, 16], [0x64400000, 10], [0x00000000, 8]];
  const quad = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
  const hex = (n: number) => `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  await fc.assert(
    fc.property(fc.constantFrom(...ranges), fc.integer({ min: 0, max: 0xffffffff }), ([base, bits], r) => {
      const n = (base | (r >>> bits)) >>> 0;
      const forms = [quad(n), `::ffff:${quad(n)}`, `::ffff:${hex(n)}`, `64:ff9b::${hex(n)}`, `2002:${hex(n)}::1`, `::ffff:0:${quad(n)}`];
      return forms.every(isBlockedAddress);
    }),
    { numRuns: 500 },
  );
  t.pass('500 addresses in private ranges, each in six forms');
});

/** What a receiver following docs/webhooks.md does with `X-Service-Signature`. */
function serviceVerifies(secret: string, headers: Record<string, string>, body: string): boolean {
  const expected = createHmac('sha256', secret).update(`${headers['x-service-timestamp']}.${body}`).digest();
  const given = Buffer.from(headers['x-service-signature'], 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

t.test('signatures: both verify with the one secret, for any body and event id (standardwebhooks, node crypto)', async (t) => {
  const eventId = fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/);
  await fc.assert(
    fc.property(fc.jsonValue(), eventId, fc.integer({ min: 0, max: 2 ** 31 }), (value, id, offset) => {
      const secret = newSigningSecret();
      const body = JSON.stringify({ event_type: 'alerts.triggered', data: value });
      const ts = Math.floor(Date.now() / 1000);
      const h = signatureHeaders(secret, id, ts, body);
      if (!/^[0-9a-f]{64}$/.test(h['x-service-signature'])) return false;
      if (!serviceVerifies(secret, { ...h }, body)) return false;
      // The library checks the signature and that the timestamp is recent.
      const parsed = new Webhook(secret).verify(body, { ...h });
      if (JSON.stringify(parsed) !== JSON.stringify(JSON.parse(body))) return false;
      // Another secret or a changed body verifies with neither.
      const other = newSigningSecret();
      if (serviceVerifies(other, { ...h }, body) || serviceVerifies(secret, { ...h }, `${body} `)) return false;
      let refused = 0;
      for (const attempt of [() => new Webhook(other).verify(body, { ...h }), () => new Webhook(secret).verify(`${body} `, { ...h })]) {
        try {
          attempt();
        } catch {
          refused++;
        }
      }
      void offset;
      return refused === 2 && h['webhook-id'] === id && h['x-service-event-id'] === id && h['webhook-timestamp'] === String(ts);
    }),
    { numRuns: 200 },
  );
  t.pass('200 bodies and event ids verified both ways');
});

t.test('ids: deliveries are derived from endpoint and event, and event ids are header-safe', async (t) => {
  t.equal(deliveryId('whe_a', 'evt_1'), deliveryId('whe_a', 'evt_1'), 'same endpoint and event, same delivery');
  t.not(deliveryId('whe_a', 'evt_1'), deliveryId('whe_b', 'evt_1'));
  t.not(deliveryId('whe_a', 'evt_1'), deliveryId('whe_a', 'evt_2'));
  t.match(deliveryId('whe_a', 'evt_1'), /^whd_[0-9a-f]{32}$/);
  fc.assert(fc.property(fc.string(), fc.string(), (a, b) => /^whd_[0-9a-f]{32}$/.test(deliveryId(a, b))));
  fc.assert(fc.property(fc.string(), (s) => !EVENT_ID.test(s) || !/[\r\n\0 ]/.test(s)));
});

t.test('sealed secrets: round trip, a wrong key refuses, the key file is made once with mode 0600', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sb-box-'));
  t.teardown(() => removeDir(dir));
  const box = await SecretBox.open(dir);
  const again = await SecretBox.open(dir);
  const secret = newSigningSecret();
  const sealed = box.seal(secret);
  t.notOk(JSON.stringify(sealed).includes(secret.slice(6)), 'the stored form does not hold the secret');
  t.equal(again.open(sealed), secret, 'the same key file opens it');
  t.equal(statSync(join(dir, 'webhook-secrets.key')).mode & 0o777, 0o600);
  const other = await SecretBox.open(dir, Buffer.alloc(32, 7).toString('base64'));
  t.throws(() => other.open(sealed), 'another key cannot open it');
  t.throws(() => SecretBox.fromKey(Buffer.alloc(16)));
});

t.test('Retry-After: seconds or an HTTP date', async (t) => {
  t.equal(retryAfter('3'), 3000);
  t.equal(retryAfter(' 0 '), 0);
  t.equal(retryAfter(new Date(10_000).toUTCString(), 4000), 6000);
  t.equal(retryAfter(new Date(1000).toUTCString(), 4000), 0, 'a date in the past: now');
  t.equal(retryAfter(undefined), null);
  t.equal(retryAfter('soon'), null);
  t.equal(retryAfter(['2', '5']), 2000);
});

t.test('settings: WEBHOOK_RETRY_SCHEDULE_MS, WEBHOOK_ALLOW_PRIVATE_URLS, WEBHOOK_SECRETS_KEY', async (t) => {
  const { loadConfig } = await import('../platform/config.js');
  t.same(loadConfig({}).webhooks, { retryScheduleMs: [0, 60_000, 300_000, 900_000, 3_600_000, 14_400_000], allowPrivateUrls: false, secretsKey: undefined, deliveryRetentionMs: 30 * 86_400_000 }, 'the addendum schedule by default; private URLs refused; the log kept 30 days');
  t.same(loadConfig({ WEBHOOK_RETRY_SCHEDULE_MS: ' 0, 50 ,100' }).webhooks.retryScheduleMs, [0, 50, 100]);
  t.equal(loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }).webhooks.allowPrivateUrls, true);
  const key = Buffer.alloc(32, 1).toString('base64');
  t.equal(loadConfig({ WEBHOOK_SECRETS_KEY: key }).webhooks.secretsKey, key);
  for (const [name, value] of [
    ['WEBHOOK_RETRY_SCHEDULE_MS', 'a,b'], ['WEBHOOK_RETRY_SCHEDULE_MS', '-1,5'], ['WEBHOOK_RETRY_SCHEDULE_MS', '0,'], ['WEBHOOK_RETRY_SCHEDULE_MS', Array(21).fill('1').join(',')],
    ['WEBHOOK_RETRY_SCHEDULE_MS', `0,${8 * 86_400_000}`], ['WEBHOOK_RETRY_SCHEDULE_MS', '0,500,100'], ['WEBHOOK_ALLOW_PRIVATE_URLS', 'yes'], ['WEBHOOK_SECRETS_KEY', Buffer.alloc(16).toString('base64')],
  ]) {
    t.throws(() => loadConfig({ [name]: value }), new RegExp(name), `${name}=${value.slice(0, 30)} stops the start naming it`);
  }
});
