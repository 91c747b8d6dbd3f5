/**
 * Webhook deliveries per second to a local receiver, against bare HTTP POSTs from the same process to the same
 * receiver in the same run.
 *
 * The receiver is a plain `node:http` server in its own process (answers 200, counts requests; `GET /count`
 * reads the count). The bare baseline POSTs a body of the same size with `BENCH_CONCURRENCY` requests in
 * flight over a keep-alive agent. The delivery run dispatches events with `dispatchWebhookEvent` on an
 * in-process runtime over the embedded store (one delivery actor per event: a durable `DELIVER`, a signed
 * POST, a durable outcome and its log record), `BENCH_CONCURRENCY` dispatches in flight, and counts until the
 * receiver has every request and every delivery's log record says `succeeded`.
 *
 * `node dist/bench/webhooks.js`; knobs: `BENCH_EVENTS` (3000), `BENCH_CONCURRENCY` (64), `BENCH_ENDPOINTS` (1).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import { tmpdir, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { builtinKinds, startRuntime } from '../actors/mod.js';
import { deliveryKind, dispatchWebhookEvent, newSigningSecret, SecretBox, webhookDeliveries, webhookEndpoints } from '../actors/delivery/mod.js';
import { openStore } from '../store/mod.js';
import { rmSync } from 'node:fs';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 3000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS ?? 1);

/** The receiver process: `node dist/bench/webhooks.js receiver`. */
function receiverMain(): void {
  let count = 0;
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/count') return res.end(String(count));
    req.resume();
    req.on('end', () => {
      count++;
      res.end('ok');
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as { port: number }).port }));
}

const body = (i: number) =>
  JSON.stringify({
    event_type: 'alerts.triggered',
    alert: { id: 'ar_bench', name: 'function errors', project_id: 'proj_bench', metric: 'function_errors', operator: '>=', threshold_value: 5, current_value: i, previous_state: 'ok', triggered_at: new Date().toISOString() },
  });

async function startReceiverProcess(): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(fileURLToPath(import.meta.url), ['receiver'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve) => child.once('message', (m: { port: number }) => resolve(m.port)));
  return { child, port };
}

function get(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      let s = '';
      res.on('data', (c) => (s += c));
      res.on('end', () => resolve(s));
    })
      .on('error', reject)
      .end();
  });
}

/** Runs `total` jobs with `concurrency` in flight. */
async function pool(total: number, concurrency: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all([...Array(Math.min(concurrency, total))].map(async () => {
    while (next < total) await job(next++);
  }));
}

const cpuMicros = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

async function bare(port: number): Promise<{ rate: number; cpuUs: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const post = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const b = body(i);
      const req = request({ host: '127.0.0.1', port, path: '/hook', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(b) } }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(String(res.statusCode)))));
      });
      req.on('error', reject);
      req.end(b);
    });
  await pool(1000, CONCURRENCY, post); // warm-up: connections open, the JIT warm
  const t0 = performance.now();
  const c0 = cpuMicros();
  await pool(EVENTS, CONCURRENCY, post);
  const s = (performance.now() - t0) / 1000;
  const cpuUs = (cpuMicros() - c0) / EVENTS;
  agent.destroy();
  return { rate: EVENTS / s, cpuUs };
}

async function deliveries(port: number): Promise<{ rate: number; dispatchRate: number; cpuUs: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'sb-bench-webhooks-'));
  const store = await openStore({ dataDir: dir });
  const secrets = await SecretBox.open(dir);
  const runtime = await startRuntime({
    store,
    kinds: builtinKinds([deliveryKind({ store, secrets, allowPrivate: true })]),
    worker: true,
    shardCount: 64,
    leaseTtlMs: 3000,
    passivateAfterMs: 60_000,
    askTimeoutMs: 30_000,
  });
  try {
    const now = new Date().toISOString();
    for (let i = 0; i < ENDPOINTS; i++) {
      await webhookEndpoints(store).insert({
        id: `whe_bench${i}`, account_id: 'acc_bench', slot: i, name: `bench ${i}`, url: `http://127.0.0.1:${port}/hook`, event_types: ['alerts.triggered'], headers: {},
        timeout_ms: 5000, enabled: true, secret: secrets.seal(newSigningSecret()), created_at: now, updated_at: now,
      });
    }
    const deps = { store, client: runtime.client };
    const dispatch = (prefix: string) => async (i: number) => {
      await dispatchWebhookEvent(deps, { id: `${prefix}_${i}`, type: 'alerts.triggered', account_id: 'acc_bench', project_id: 'proj_bench', body: JSON.parse(body(i)) });
    };
    const expected = async (n: number) => {
      const start = Number(await get(port, '/count'));
      return async () => {
        for (;;) {
          if (Number(await get(port, '/count')) - start >= n) return;
          await new Promise((r) => setTimeout(r, 10));
        }
      };
    };
    // Warm-up.
    const warm = await expected(200 * ENDPOINTS);
    await pool(200, CONCURRENCY, dispatch('warm'));
    await warm();
    const received = await expected(EVENTS * ENDPOINTS);
    const t0 = performance.now();
    const c0 = cpuMicros();
    await pool(EVENTS, CONCURRENCY, dispatch('evt'));
    const dispatched = (performance.now() - t0) / 1000;
    await received();
    // Every delivery durably recorded as succeeded (the log record follows the outcome's snapshot).
    const log = webhookDeliveries(store);
    for (;;) {
      if ((await log.count({ status: 'succeeded' })) >= (EVENTS + 200) * ENDPOINTS) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const s = (performance.now() - t0) / 1000;
    return { rate: (EVENTS * ENDPOINTS) / s, dispatchRate: EVENTS / dispatched, cpuUs: (cpuMicros() - c0) / (EVENTS * ENDPOINTS) };
  } finally {
    await runtime.stop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { child, port } = await startReceiverProcess();
  try {
    const load = loadavg().map((l) => l.toFixed(2)).join(' ');
    const before = await bare(port);
    const d = await deliveries(port);
    const after = await bare(port);
    const baseline = (before.rate + after.rate) / 2;
    process.stdout.write(
      `${new Date().toISOString()} load ${load}; ${EVENTS} events × ${ENDPOINTS} endpoint(s), ${CONCURRENCY} in flight\n` +
        `bare HTTP POST (same process, same receiver): ${before.rate.toFixed(0)} /s before, ${after.rate.toFixed(0)} /s after; ` +
        `${before.cpuUs.toFixed(0)} / ${after.cpuUs.toFixed(0)} µs CPU per POST\n` +
        `webhook deliveries (dispatch → signed POST received → log record succeeded): ${d.rate.toFixed(0)} /s ` +
        `(${((d.rate / baseline) * 100).toFixed(1)} % of bare); ${d.cpuUs.toFixed(0)} µs CPU per delivery (this process: runtime, store, HTTP); ` +
        `dispatches accepted ${d.dispatchRate.toFixed(0)} /s\n`,
    );
  } finally {
    child.kill('SIGTERM');
  }
}

if (process.argv[2] === 'receiver') receiverMain();
else
  main().then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
