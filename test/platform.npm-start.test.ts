/**
 * `npm start` is the start command (operator.md), and SIGTERM drains: a SIGTERM to the npm process (what a
 * supervisor or a script's `kill $!` sends) must reach the platform, which drains and exits 0, and npm exits when
 * it does. npm forwards SIGTERM and SIGINT to the script's process, which is a shell (`sh -c`) unless the script
 * `exec`s node: a shell does not pass the signal on, and the platform went on serving, re-parented, ports held.
 */
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { http } from './helpers/http.js';
import { DIST, removeDir } from './helpers/platform.js';

/** The processes under `pid`, its children's children included (`ps`): pid and command line. */
function descendants(pid: number): Array<{ pid: number; args: string }> {
  const out = spawnSync('ps', ['-e', '-o', 'pid=,ppid=,args='], { encoding: 'utf8' }).stdout;
  const rows = out.trim().split('\n').map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l)!).filter(Boolean).map((m) => ({ pid: Number(m[1]), ppid: Number(m[2]), args: m[3] }));
  const found: Array<{ pid: number; args: string }> = [];
  for (let i = 0, parents = [pid]; i < parents.length; i++) {
    for (const row of rows) if (row.ppid === parents[i]) found.push({ pid: row.pid, args: row.args }), parents.push(row.pid);
  }
  return found;
}

/** Whether a TCP port on loopback can be bound now (nobody listens on it). */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

t.test('SIGTERM to `npm start`: the platform drains and exits 0, its ports freed, and npm exits 0 with it', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-npm-start-'));
  t.teardown(() => removeDir(dataDir));
  // The package's own start script, from the repository root. `--ignore-scripts` leaves out `prestart` (the
  // build, which compiled this test already) and runs `start` itself, as npm documents it.
  const npm = spawn('npm', ['start', '--ignore-scripts', '--silent'], {
    cwd: join(DIST, '..'),
    env: {
      ...process.env,
      EDGE_PORT: '0',
      SOCKET_PORT: '0',
      SIP_PORT: '0',
      SIP_TLS_PORT: 'off',
      RTP_PORT_MIN: '0',
      RTP_PORT_MAX: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      OPERATOR_TOKEN: 'npm-start-test-operator-token',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  npm.stdout!.on('data', (d) => (out += d));
  npm.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => npm.once('exit', (code, signal) => resolve({ code, signal })));
  // Whatever is left of the run is ended, by pid: a platform that never got the signal would serve on otherwise.
  let left: number[] = [];
  t.teardown(() => {
    for (const pid of [npm.pid!, ...left]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone already */
      }
    }
  });
  const serving = await new Promise<string>((resolve, reject) => {
    const check = () => {
      const m = /serving: (.*)\n/.exec(out);
      if (m) resolve(m[1]);
    };
    npm.stdout!.on('data', check);
    void exited.then(({ code }) => reject(new Error(`npm start exited with ${code} before serving:\n${out}`)));
  });
  const edge = /edge (http:\/\/[^\s,]+)/.exec(serving)![1];
  const socket = /socket (http:\/\/[^\s,]+)/.exec(serving)![1];
  t.equal((await http(edge, 'GET', '/healthz')).status, 200, 'it serves');
  left = descendants(npm.pid!).map((p) => p.pid);
  const platform = descendants(npm.pid!).find((p) => /^\S*node\s.*dist\/platform\/main\.js/.test(p.args));
  t.ok(platform, 'the platform runs under npm');

  npm.kill('SIGTERM');
  t.same(await exited, { code: 0, signal: null }, 'npm exits 0, not by the signal');
  let alive = true;
  try {
    process.kill(platform!.pid, 0);
  } catch {
    alive = false;
  }
  t.notOk(alive, 'the platform has exited too');
  t.match(out, /"msg":"draining".*"signal":"SIGTERM"|"signal":"SIGTERM".*"msg":"draining"/, 'the platform got the SIGTERM and drained');
  t.match(out, /"msg":"drained"/, 'to the end');
  t.ok(await bindable(Number(new URL(edge).port)), 'the edge port is free');
  t.ok(await bindable(Number(new URL(socket).port)), 'the socket port is free');
});
