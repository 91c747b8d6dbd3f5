/**
 * The roles of a deployment start in any order: a role started before its NATS server waits for it (retrying,
 * warning while it waits) and serves once it is up; told to stop while it waits, it exits 0; credentials the
 * server refuses stop it at once, with a message that says so.
 */
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { chatProject } from './helpers/chat.js';
import { eventually } from './helpers/eventually.js';
import { http } from './helpers/http.js';
import { freePort, natsAvailable, startNats } from './helpers/nats.js';
import { removeDir, startPlatform, starting, type Spawned, type Starting } from './helpers/platform.js';
import { MEDIA_ENV } from './helpers/voice.js';

// Without nats-server this skips locally; with CI=true natsAvailable() throws, so it fails instead.
const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

/** The warning a role logs (JSON, at warn) while no NATS server answers. */
const WAITING = /"level":40,[^\n]*"msg":"NATS is not reachable yet/;

/** Waits until the process has logged that it waits for NATS. */
function waiting(s: Starting): Promise<Spawned> {
  return eventually(async () => {
    const p = s.process();
    if (p && p.child.exitCode !== null) throw new Error(`${s.role} exited with ${p.child.exitCode} instead of waiting for NATS:\n${p.stdout()}\n${p.stderr()}`);
    return p && WAITING.test(p.stdout()) ? p : undefined;
  }, 30_000, `${s.role} to log that it waits for NATS`);
}

t.test('every role started before the NATS server waits for it, then serves: healthz and a Chat API turn', needsNats, async (t) => {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-start-order-'));
  const env = {
    ...MEDIA_ENV,
    NATS_URL: `nats://127.0.0.1:${port}`,
    OPERATOR_TOKEN: `start-order-${randomBytes(8).toString('hex')}`,
    LEASE_TTL_MS: '1500',
    SHARDS: '16',
  };
  // Registered first, so it runs last: after every process has stopped.
  t.teardown(() => removeDir(dataDir));
  const roles = ['edge', 'socket', 'worker', 'media'].map((role) => starting(t, role, { roles: [role], dataDir, env }));
  for (const r of roles) await waiting(r);

  const nats = await startNats({ port });
  t.teardown(() => nats.stop());
  const [edge, socket, worker, media] = await Promise.all(roles.map((r) => r.started));

  t.equal((await http(edge.edge, 'GET', '/healthz')).status, 200, 'the edge serves');
  t.equal((await http(socket.socket, 'GET', '/healthz')).status, 200, 'the socket gateway serves');
  t.match(media.stdout(), /serving: media sip:/, 'the media gateway serves');
  t.match(edge.stdout(), /"msg":"NATS is not reachable yet: retrying every 2 s"/, 'the edge said why it waited');
  // The worker holds every shard, and a turn goes edge → NATS → worker → back.
  await eventually(async () => {
    const r = (await http(edge.edge, 'GET', '/admin/v1/runtime', { headers: { authorization: `Bearer ${env.OPERATOR_TOKEN}` } })).body;
    return r.unownedShards?.length === 0 && r.workers?.length === 1 && r.workers[0].id === worker.worker;
  }, 20_000, 'the worker to own every shard');
  const c = await chatProject(edge);
  const created = await c.chat('create', {});
  t.equal(created.status, 200, created.text);
  const answer = await c.chat('respond', { conversation_id: created.body.conversation_id, message: 'When do you open?' });
  t.equal(answer.status, 200, answer.text);
  t.equal(answer.body.response, 'We are open from 9am to 5pm, Monday to Friday.');

  for (const p of [media, socket, worker, edge]) t.equal(await p.stop(), 0, 'each drains and exits 0');
});

t.test('SIGTERM or SIGINT while waiting for NATS: the process exits 0', needsNats, async (t) => {
  const port = await freePort();
  // At info: the line that says why the process stopped.
  const env = { ...MEDIA_ENV, NATS_URL: `nats://127.0.0.1:${port}`, LOG_LEVEL: 'info' };
  // Every role in one process (the sandbox, the store and the blobs are open while it waits), and a worker alone.
  for (const [roles, signal] of [[[], 'SIGTERM'], [['worker'], 'SIGINT']] as const) {
    const dataDir = mkdtempSync(join(tmpdir(), 'sb-start-order-'));
    t.teardown(() => removeDir(dataDir));
    const s = starting(t, roles.join('+') || 'all roles', { roles: [...roles], dataDir, env });
    const p = await waiting(s);
    p.child.kill(signal);
    t.equal(await p.exited, 0, `${s.role}: ${signal} while waiting exits 0`);
    t.match(p.stdout(), /"msg":"stopped while waiting for NATS"/);
    t.notMatch(p.stdout(), /serving:/, 'it never served');
    t.equal(p.stderr(), '', 'nothing on stderr');
  }
});

t.test('credentials in NATS_URL: the right ones connect; wrong ones stop the start at once, saying so', needsNats, async (t) => {
  const nats = await startNats({ args: ['--user', 'switchboard', '--pass', 's3cret'] });
  t.teardown(() => nats.stop());
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-start-order-'));
  t.teardown(() => removeDir(dataDir));
  const at = (userInfo: string) => ({ ...MEDIA_ENV, NATS_URL: `nats://${userInfo}@127.0.0.1:${nats.port}` });

  const wrong = starting(t, 'worker', { roles: ['worker'], dataDir, env: at('switchboard:wrong') });
  await t.rejects(wrong.started, /platform exited with 1/, 'the start fails instead of waiting');
  const p = wrong.process()!;
  t.match(p.stderr(), /refused this process's credentials \(Authorization Violation\): check the user and password \(or token\) in NATS_URL/);
  t.notMatch(p.stderr() + p.stdout(), /wrong/, 'the password is not shown');
  t.notMatch(p.stdout(), WAITING, 'it did not wait');

  const edge = await startPlatform({ roles: ['edge'], dataDir, env: at('switchboard:s3cret') });
  t.teardown(() => edge.stop());
  t.equal((await http(edge.edge, 'GET', '/healthz')).status, 200, 'the right credentials connect');
});
