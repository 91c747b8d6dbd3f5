/**
 * The CLI's webhook commands (`webhooks ...`, `deliveries ...`) against a started platform with an alerts key,
 * as the README shows them.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { CLI, platformFor } from './helpers/platform.js';
import { alertsTenant, startReceiver } from './helpers/webhooks.js';
import { eventually } from './helpers/eventually.js';

const run = promisify(execFile);
const COMMANDS = [
  'webhooks create', 'webhooks list', 'webhooks get', 'webhooks update', 'webhooks delete', 'webhooks rotate-secret', 'webhooks test',
  'deliveries list', 'deliveries get', 'deliveries redeliver',
];

t.test('help names every webhook command', async (t) => {
  const { stdout } = await run(CLI, ['help']);
  for (const command of COMMANDS) t.match(stdout, `\n  ${command}`, command);
  t.match(stdout, 'SWITCHBOARD_ALERTS_KEY');
});

t.test('every webhook command reaches the Alerts API with the alerts key', async (t) => {
  const p = await platformFor(t, { env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
  const r = await startReceiver();
  t.teardown(() => r.close());
  const { key } = await alertsTenant(p);
  const env = { ...process.env, SWITCHBOARD_URL: p.edge, SWITCHBOARD_ALERTS_KEY: key, OPERATOR_TOKEN: '' };
  const cli = async (...args: string[]) => {
    const { stdout } = await run(CLI, args, { env });
    return JSON.parse(stdout);
  };
  const created = await cli('webhooks', 'create', '--name', 'ops', '--webhook-url', r.url, '--events', 'alerts.triggered', '--header', 'X-Team: ops', '--header', 'Authorization: Bearer t', '--timeout-ms', '2000');
  t.match(created, { id: /^whe_/, signing_secret: /^whsec_/, event_types: ['alerts.triggered'], headers: { 'x-team': 'ops', authorization: 'Bearer t' }, timeout_ms: 2000 });
  t.match(await cli('webhooks', 'list'), { data: [{ id: created.id }] });
  t.match(await cli('webhooks', 'list', '--enabled', 'false'), { data: [] });
  t.match(await cli('webhooks', 'get', created.id), { id: created.id, name: 'ops' });
  t.match(await cli('webhooks', 'update', created.id, '--name', 'ops 2', '--enabled', 'true', '--events', 'alerts.triggered,alerts.resolved'), { name: 'ops 2', event_types: ['alerts.triggered', 'alerts.resolved'] });
  const rotated = await cli('webhooks', 'rotate-secret', created.id);
  t.match(rotated.signing_secret, /^whsec_/);
  const sent = await cli('webhooks', 'test', created.id);
  t.match(sent, { id: /^whd_/, event_type: 'webhook.test' });
  await r.waitFor(1);
  await eventually(async () => ((await cli('deliveries', 'get', created.id, sent.id)).status === 'succeeded' ? true : undefined));
  t.match(await cli('deliveries', 'list', created.id, '--limit', '5'), { data: [{ id: sent.id }], next_cursor: null });
  t.match(await cli('deliveries', 'list', created.id, '--event', sent.event_id), { data: [{ id: sent.id }] });
  t.match(await cli('deliveries', 'redeliver', created.id, sent.id), { id: sent.id });
  await r.waitFor(2);
  t.same(await cli('webhooks', 'delete', created.id), { status: 204 });
  const missing = await run(CLI, ['webhooks', 'get', created.id], { env }).catch((e) => e);
  t.equal(missing.code, 1);
  t.match(JSON.parse(missing.stderr), { message: 'webhook endpoint not found' });
  const noKey = await run(CLI, ['webhooks', 'list'], { env: { ...env, SWITCHBOARD_ALERTS_KEY: '' } }).catch((e) => e);
  t.equal(noKey.code, 2);
  t.match(noKey.stderr, 'no alerts key');
});
