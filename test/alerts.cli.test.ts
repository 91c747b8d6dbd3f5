/**
 * The CLI's alert rule commands (`alerts rules ...`, `alerts active`) against a started platform with an
 * alerts key, as the README shows them.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { CLI, platformFor } from './helpers/platform.js';
import { alertsTenant } from './helpers/webhooks.js';

const run = promisify(execFile);
const COMMANDS = ['alerts rules create', 'alerts rules list', 'alerts rules get', 'alerts rules update', 'alerts rules delete', 'alerts active'];

t.test('help names every alerts command', async (t) => {
  const { stdout } = await run(CLI, ['help']);
  for (const command of COMMANDS) t.match(stdout, `\n  ${command}`, command);
});

t.test('every alerts command reaches the Alerts API with the alerts key', async (t) => {
  const p = await platformFor(t);
  const { key } = await alertsTenant(p);
  const env = { ...process.env, SWITCHBOARD_URL: p.edge, SWITCHBOARD_ALERTS_KEY: key, OPERATOR_TOKEN: '' };
  const cli = async (...args: string[]) => JSON.parse((await run(CLI, args, { env })).stdout);
  const created = await cli('alerts', 'rules', 'create', '--name', 'errors', '--metric', 'function_errors', '--operator', '>=', '--threshold', '5', '--window', '10m');
  t.match(created, { id: /^ar_/, name: 'errors', metric: 'function_errors', operator: '>=', threshold_value: 5, window_duration: '10m', project_id: null, enabled: true });
  t.match(await cli('alerts', 'rules', 'list'), { data: [{ id: created.id }] });
  t.match(await cli('alerts', 'rules', 'list', '--metric', 'api_errors'), { data: [] });
  t.match(await cli('alerts', 'rules', 'get', created.id), { id: created.id });
  t.match(await cli('alerts', 'rules', 'update', created.id, '--threshold', '7', '--enabled', 'false'), { threshold_value: 7, enabled: false });
  t.same(await cli('alerts', 'active'), { data: [] });
  t.same(await cli('alerts', 'rules', 'delete', created.id), { status: 204 });
  const bad = await run(CLI, ['alerts', 'rules', 'create', '--name', 'x', '--metric', 'cpu', '--operator', '>', '--threshold', '1', '--window', '5m'], { env }).catch((e) => e);
  t.equal(bad.code, 1, 'an API error exits 1');
  t.match(bad.stderr, 'metric must be one of');
  const missing = await run(CLI, ['alerts', 'rules', 'create', '--name', 'x'], { env }).catch((e) => e);
  t.equal(missing.code, 2, 'a usage error exits 2');
});
