/**
 * The benchmarks reach NATS through the roles' connect (actors/transport/nats-connect.ts), so a URL with
 * credentials, or a server that is not up yet, behaves for them as for the roles: nats.js's own `connect`
 * ignores a URL's user info, and fails at once when no server answers.
 */
import t from 'tap';
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connectNats } from '../actors/transport/mod.js';
import { natsAvailable, startNats } from './helpers/nats.js';
import { DIST } from './helpers/platform.js';

const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

t.test('no benchmark connects with nats.js directly', async (t) => {
  for (const file of ['actors', 'nats-echo']) {
    const source = readFileSync(join(DIST, 'bench', `${file}.js`), 'utf8');
    t.notMatch(source, /\bconnect\(\s*\{/, `bench/${file}.ts calls no connect({...}) of its own`);
  }
});

t.test("the NATS echo process answers over a URL with credentials, as the roles' connect reads them", needsNats, async (t) => {
  const nats = await startNats({ args: ['--user', 'bench', '--pass', 'b3nch'] });
  t.teardown(() => nats.stop());
  const url = `nats://bench:b3nch@127.0.0.1:${nats.port}`;
  const echo = fork(join(DIST, 'bench', 'nats-echo.js'), [url], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let stderr = '';
  echo.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => echo.once('exit', resolve));
  t.teardown(() => {
    echo.kill('SIGKILL');
  });
  const ready = await Promise.race([new Promise((r) => echo.once('message', () => r('ready'))), exited.then((code) => `exited with ${code}`)]);
  t.equal(ready, 'ready', stderr);
  const nc = await connectNats(url);
  t.teardown(() => nc.close());
  const answer = await nc.request('bench.echo', new Uint8Array([1, 2, 3]), { timeout: 5000 });
  t.same([...answer.data], [1, 2, 3], 'it echoes');
});
