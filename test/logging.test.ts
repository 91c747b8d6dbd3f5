/**
 * Logs for a person at a terminal, JSON for collectors. `npm start` on a terminal writes pretty lines and
 * does not log every request at info; piped (a log collector, these tests' other platforms) it writes JSON
 * lines with Fastify's request lines, as before. `LOG_FORMAT` overrides the choice. The terminal is a real
 * pseudo-terminal made by util-linux `script`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { createLogger } from '../platform/logger.js';
import { logged } from './helpers/eventually.js';
import { http } from './helpers/http.js';
import { MAIN, platformFor, removeDir } from './helpers/platform.js';

const hasScript = spawnSync('script', ['--version']).status === 0;
/** Fastify's line per request, as a JSON line (pino's level 30). */
const REQUEST_LINE = /^\{"level":30,.*"msg":"request completed"/m;
// eslint-disable-next-line no-control-regex
const plain = (s: string) => s.replace(/\u001b\[[0-9;]*m/g, '').replace(/\r/g, '');

/** Runs the platform on a pseudo-terminal; resolves once it serves, with its output so far and a stop. */
async function startOnTerminal(env: Record<string, string>) {
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-tty-'));
  const child = spawn('script', ['-qfec', `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(MAIN)}`, '/dev/null'], {
    env: { ...process.env, EDGE_PORT: '0', SOCKET_PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, OPERATOR_TOKEN: 'tty-operator-token-0123456789', LOG_LEVEL: 'info', LOG_FORMAT: '', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const edge = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`did not start:\n${out}`)), 30_000);
    const check = () => {
      const m = /edge (http:\/\/[^\s,]+)/.exec(plain(out));
      if (m && /serving:/.test(out)) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout!.on('data', check);
  });
  return {
    edge,
    output: () => plain(out),
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
      removeDir(dataDir);
    },
  };
}

t.test('the format follows the terminal unless LOG_FORMAT says', async (t) => {
  t.match(createLogger({ level: 'info', format: 'auto', isTTY: true }), { pretty: true, requestLevel: 'debug' });
  t.match(createLogger({ level: 'info', format: 'auto', isTTY: false }), { pretty: false, requestLevel: 'info' });
  t.match(createLogger({ level: 'info', format: 'json', isTTY: true }), { pretty: false, requestLevel: 'info' });
  t.match(createLogger({ level: 'info', format: 'pretty', isTTY: false }), { pretty: true, requestLevel: 'debug' });
});

t.test('on a terminal: pretty lines, and requests are not logged at info', { skip: hasScript ? false : 'util-linux script is not installed' }, async (t) => {
  const p = await startOnTerminal({});
  t.teardown(() => p.stop());
  for (let i = 0; i < 3; i++) t.equal((await http(p.edge, 'GET', '/healthz')).status, 200);
  t.equal((await http(p.edge, 'GET', '/admin/v1/accounts', { headers: { authorization: 'Bearer tty-operator-token-0123456789' } })).status, 200);
  await new Promise((r) => setTimeout(r, 200));
  const out = p.output();
  t.match(out, /INFO.*uWebSockets\.js native binary loaded/, 'a start-up line, pretty');
  t.notMatch(out, /^\{"level"/m, 'no JSON lines');
  t.notMatch(out, /incoming request|request completed/, 'no line per request');
});

t.test('on a terminal with LOG_FORMAT=json: JSON lines', { skip: hasScript ? false : 'util-linux script is not installed' }, async (t) => {
  const p = await startOnTerminal({ LOG_FORMAT: 'json' });
  t.teardown(() => p.stop());
  await http(p.edge, 'GET', '/healthz');
  await logged(() => p.output(), REQUEST_LINE);
  t.match(p.output(), REQUEST_LINE);
});

t.test('piped (not a terminal): JSON lines with every request, as collectors expect', async (t) => {
  const p = await platformFor(t, { env: { LOG_LEVEL: 'info' } });
  await http(p.edge, 'GET', '/healthz');
  await logged(() => p.stdout(), REQUEST_LINE);
  t.match(p.stdout(), REQUEST_LINE);
});
