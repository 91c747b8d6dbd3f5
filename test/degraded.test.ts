/**
 * Degradation is visible, not silent: with no worker alive, an edge on a real NATS server says so at warn,
 * once per cause, and shows it in `/healthz` (still 200 with `status: "ok"`: the edge is alive and serves
 * every other API) and in `/admin/v1/runtime`; when a worker comes, the causes clear and chats answer.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { RuntimeHealth, watchPlacement } from '../actors/health.js';
import type { Ownership } from '../actors/placement/types.js';
import { eventually } from './helpers/eventually.js';
import { chatProject } from './helpers/chat.js';
import { http } from './helpers/http.js';
import { natsAvailable, startNats } from './helpers/nats.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';

/** The edge's JSON log lines at warn (pino level 40) whose message is `msg`. */
const warnings = (p: Platform, msg: string) =>
  p.stdout().split('\n').filter((line) => line.startsWith('{') && JSON.parse(line).level === 40 && JSON.parse(line).msg === msg);

t.test('no worker alive: warn once per cause, degraded in /healthz and the runtime API; a worker clears it', { skip: natsAvailable() ? false : 'nats-server is not installed' }, async (t) => {
  const nats = await startNats();
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-degraded-'));
  // One shard, so every conversation's ask goes to the same shard: one cause however many chats try.
  const env = { NATS_URL: nats.url, OPERATOR_TOKEN: `degraded-${randomBytes(8).toString('hex')}`, SHARDS: '1', LEASE_TTL_MS: '1000', ASK_TIMEOUT_MS: '1500' };
  const edge = await startPlatform({ roles: ['edge'], dataDir, env });
  const socket = await startPlatform({ roles: ['socket'], dataDir, env });
  let worker: Platform | null = null;
  t.teardown(async () => {
    await worker?.stop();
    await socket.stop();
    await edge.stop();
    await nats.stop();
    removeDir(dataDir);
  });
  const runtime = async () => (await http(edge.edge, 'GET', '/admin/v1/runtime', { headers: { authorization: `Bearer ${env.OPERATOR_TOKEN}` } })).body;

  const health = await eventually(async () => {
    const r = await http(edge.edge, 'GET', '/healthz');
    return r.body.degraded ? r : null;
  }, 10_000, 'the edge to report degraded', 100);
  t.equal(health!.status, 200, 'liveness stays 200');
  t.equal(health!.body.status, 'ok');
  t.match(health!.body.degraded, [{ reason: 'no worker is alive: no actor can answer', since: String }]);
  const socketHealth = await eventually(async () => {
    const r = await http(socket.socket, 'GET', '/healthz');
    return r.body.degraded ? r : null;
  }, 10_000, 'the socket gateway to report degraded', 100);
  t.equal(socketHealth!.status, 200, 'the socket gateway too');
  t.match(socketHealth!.body, { status: 'ok', degraded: [{ reason: 'no worker is alive: no actor can answer' }] });

  const c = await chatProject(edge);
  for (let i = 0; i < 2; i++) {
    const r = await c.chat('create', {});
    t.equal(r.status, 503, `chat ${i + 1}: 503 without a worker`);
  }
  t.equal(warnings(edge, 'no worker owns shard 0').length, 1, 'one warning for the shard, for two chats');
  t.equal(warnings(edge, 'no worker is alive: no actor can answer').length, 1, 'one warning that no worker is alive');
  t.same(
    (await runtime()).degraded.map((d: { reason: string }) => d.reason).sort(),
    ['no worker is alive: no actor can answer', 'no worker owns shard 0'],
    'the runtime API lists both causes',
  );
  t.same((await http(edge.edge, 'GET', '/healthz')).body.degraded.length, 2);
  t.same((await runtime()).kinds, ['counter'], 'without a worker, the edge lists only the kinds it knows itself');

  worker = await startPlatform({ roles: ['worker'], dataDir, env });
  const created = await eventually(async () => {
    const r = await c.chat('create', {});
    return r.status === 200 ? r : null;
  }, 20_000, 'a chat to be created', 200);
  t.ok(created!.body.conversation_id, 'chats answer once a worker owns the shard');
  await eventually(async () => ((await http(edge.edge, 'GET', '/healthz')).body.degraded ? null : true), 10_000, 'the edge to be healthy again', 100);
  t.same((await http(edge.edge, 'GET', '/healthz')).body, { status: 'ok' }, 'healthy again: exactly the contract body');
  await eventually(async () => ((await http(socket.socket, 'GET', '/healthz')).body.degraded ? null : true), 10_000, 'the socket gateway to be healthy again', 100);
  t.same((await http(socket.socket, 'GET', '/healthz')).body, { status: 'ok' }, 'on the socket port too');
  const joined = await runtime();
  t.same(joined.degraded, []);
  const hosted = ['alert-rule', 'call', 'conversation', 'counter', 'delivery', 'session'];
  t.same([...joined.workers[0].kinds].sort(), hosted, "the worker's heartbeat says which kinds it hosts");
  t.same([...joined.kinds].sort(), hosted, 'the edge lists the kinds its workers host');

  // Cut off from NATS, the worker directory cannot be read: a 503 in the admin shape saying so, not a 500.
  await nats.stop();
  const away = await http(edge.edge, 'GET', '/admin/v1/runtime', { headers: { authorization: `Bearer ${env.OPERATOR_TOKEN}` } });
  t.equal(away.status, 503, 'NATS away: 503');
  t.match(away.body, { message: /^the worker directory cannot be read now \(.+\); \/healthz says/, errors: [] });
  t.equal((await http(edge.edge, 'GET', '/healthz')).status, 200, 'and /healthz still answers');
});

t.test('the directory watch: a shard unowned on one read is a handover, on two reads a cause; each logged once', async (t) => {
  const reads: Ownership[] = [
    { liveWorkers: 2, ownedShards: [0, 1, 2] },
    { liveWorkers: 2, ownedShards: [0, 2] }, // shard 1 in a handover
    { liveWorkers: 2, ownedShards: [0, 1, 2] },
    { liveWorkers: 1, ownedShards: [0, 1] }, // shard 2's worker died
    { liveWorkers: 1, ownedShards: [0, 1] },
    { liveWorkers: 1, ownedShards: [0, 1] },
    { liveWorkers: 2, ownedShards: [0, 1, 2] },
    { liveWorkers: 0, ownedShards: [] },
  ];
  const lines: string[] = [];
  const health = new RuntimeHealth((level, msg) => void lines.push(`${level} ${msg}`));
  let n = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const stop = watchPlacement({
    directory: {
      workers: async () => [],
      ownership: async () => {
        // Every read has been handled once the one after the last is asked for.
        if (n === reads.length) done();
        return reads[Math.min(n++, reads.length - 1)];
      },
    },
    shardCount: 3,
    health,
    intervalMs: 5,
  });
  const keepAlive = setInterval(() => {}, 1000); // the watch's timers do not hold the process open
  await finished;
  clearInterval(keepAlive);
  stop();
  t.same(lines, ['warn no worker owns shard 2', 'info recovered: no worker owns shard 2', 'warn no worker is alive: no actor can answer']);
  t.same(health.degraded().map((d) => d.reason), ['no worker is alive: no actor can answer']);
});
