/**
 * Messaging API benchmark (issue: messaging). Prints, from one run on one machine:
 * - BENCH_SESSIONS (1,000) concurrent sessions, each a socket that has joined the agent and then loops a user
 *   message to the agent's message for BENCH_S (5) seconds after BENCH_WARMUP_S (`warmup.ts`) seconds of the
 *   same loop: messages/s and round-trip p50/p99 (and, embedded, the platform's CPU per message: all its
 *   threads, and its main thread), embedded (one process) and, with BENCH_NATS=1, over NATS
 *   (edge + socket process, one worker), next to a bare uWebSockets.js echo server driven by the same load
 *   client with the same frames in the same run;
 * - idle capacity: BENCH_IDLE_SESSIONS (20,000) sessions opened with a socket each, the time to open them, and
 *   the platform process's memory per session once their actors are passivated (VmRSS and anonymous RSS from
 *   /proc, heap used after a full GC through the inspector).
 * - open loop: BENCH_OPEN_SESSIONS (5,000) joined sessions, each sending one user message every
 *   BENCH_OPEN_INTERVAL_MS (5,000) ms for BENCH_OPEN_S (30) seconds after BENCH_WARMUP_S seconds of the
 *   same schedule whatever the answers do; the user message to agent message latency, timed from when each
 *   message was due (p50/p99, target p99 under 50 ms; the warm-up's p99 printed apart), BENCH_OPEN_RUNS (3)
 *   times on a fresh platform each, judged by all runs' timed messages together (each run's p99 and the median
 *   run's printed beside, with the share of messages at 50 ms or later); with each run, the platform's CPU per answered
 *   message over its warm-up and timed part, all threads and the main thread (from /proc).
 * BENCH_MODES (`load,open,idle`) picks the parts; BENCH_CLIENTS (1) spreads the load sockets over processes;
 * BENCH_TIMINGS=1 prints the open loop platform's step timings (SB_TIMINGS).
 * Run: `npm run build && node dist/bench/messaging.js`.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { chatProject } from '../test/helpers/chat.js';
import { http } from '../test/helpers/http.js';
import { startNats } from '../test/helpers/nats.js';
import { removeDir, startPlatform, type Platform } from '../test/helpers/platform.js';
import { admin } from '../test/helpers/tenants.js';
import { cpuSeconds, threadCpuSeconds } from './proc.js';
import { fmt, latencyRecorder } from './stats.js';
import { WARMUP_S } from './warmup.js';
import type { LoadCommand, OpenReply, RunReply } from './ws-load.js';

const DURATION_S = Number(process.env.BENCH_S ?? 5);
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 1000);
const IDLE_SESSIONS = Number(process.env.BENCH_IDLE_SESSIONS ?? 20_000);
const IDLE_JOIN = process.env.BENCH_IDLE_JOIN === '1';
const CLIENTS = Math.max(1, Number(process.env.BENCH_CLIENTS ?? 1));
const MODES = new Set((process.env.BENCH_MODES ?? 'load,open,idle').split(','));
const OPEN_SESSIONS = Number(process.env.BENCH_OPEN_SESSIONS ?? 5000);
const OPEN_INTERVAL_MS = Number(process.env.BENCH_OPEN_INTERVAL_MS ?? 5000);
const OPEN_S = Number(process.env.BENCH_OPEN_S ?? 30);
/** How many times the open loop runs, each on a fresh platform (the verdict is the median run's). */
const OPEN_RUNS = Math.max(1, Number(process.env.BENCH_OPEN_RUNS ?? 3));
const WITH_NATS = process.env.BENCH_NATS === '1';
const PASSIVATE_AFTER_MS = Number(process.env.BENCH_PASSIVATE_AFTER_MS ?? 2000);
/** Sessions each load-client process opens at once (token, session, socket) during the idle part. */
const IDLE_CONCURRENCY = Number(process.env.BENCH_IDLE_CONCURRENCY ?? 64);
/** How long the idle part watches the platform hold its sessions without traffic (more than 30 s: see README). */
const IDLE_WATCH_S = Number(process.env.BENCH_IDLE_WATCH_S ?? 40);
/** Sockets one load-client process holds at most: its own open-file limit, less its other descriptors. */
const SOCKETS_PER_CLIENT = 9_000;
const HOST = 'bench.example.com';
/**
 * The platform's settings for every run. The access-token and session steps are rate-limited per connector
 * token and per access token (MESSAGING_HTTP_RATE, 60 a minute): thousands of widgets opening at once from
 * one connector would be throttled. A session's client events are limited to 20 a second
 * (MESSAGING_WS_RATE), which a closed loop on few sessions exceeds. Every client address is limited over the
 * token step, the session step and upgrades together (MESSAGING_ADDRESS_RATE), and each load client opens
 * thousands of sessions from its one address. None of these limits is what is measured here.
 */
// One account holds every socket of a run (up to BENCH_IDLE_SESSIONS): the gateway's socket caps (10,000 in all, 5,000
// per account by default) are lifted as the rates are; the idle part stays under the open-file limit on its own.
const PLATFORM_ENV = {
  LOG_LEVEL: 'error',
  MESSAGING_HTTP_RATE: '1000000',
  MESSAGING_WS_RATE: '1000000',
  MESSAGING_ADDRESS_RATE: '10000000',
  SOCKET_MAX_CONNECTIONS: '1000000',
  SOCKET_MAX_CONNECTIONS_PER_ACCOUNT: '1000000',
};
const TEXT = 'When do you open on Monday?';
/** The same frame the messaging client sends, for the bare echo: same size, same JSON. */
const FRAME = JSON.stringify({ type: 'EVENT_TYPE_USER_MESSAGE', payload: { text: TEXT }, metadata: { custom: { client_event_id: 'c0s0-1' } } });

/** `answered`: round trips completed in the timed run and its warm-up (an open loop times its warm-up apart). */
type Row = {
  name: string;
  perSecond: number;
  p50: number;
  p99: number;
  /** The timed part's round trips, ms (the open loop pools its runs' with them). */
  latenciesMs: number[];
  warmupP99: number | null;
  answered: number;
  errors: number;
  errorKinds: Record<string, number>;
  opened: number;
  setupMs: number;
};

/** A load-client process: one command out, one answer back. */
class LoadClient {
  private readonly child: ChildProcess;
  constructor() {
    this.child = fork(fileURLToPath(new URL('./ws-load.js', import.meta.url)), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  }
  ask<T>(cmd: LoadCommand): Promise<T> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`load client exited with ${code}`));
      this.child.once('exit', onExit);
      this.child.once('message', (m) => {
        this.child.off('exit', onExit);
        resolve(m as T);
      });
      this.child.send(cmd);
    });
  }
  async close() {
    if (this.child.exitCode === null) await this.ask({ op: 'close' }).catch(() => undefined);
  }
}

/** A loopback address no earlier run has used, for one load-client process's sockets (see ws-load.ts). */
const loopback = () => `127.${1 + Math.floor(Math.random() * 254)}.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 254)}`;
const split = (total: number, parts: number) => Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));
const merge = (into: Record<string, number>, from: Record<string, number>) => {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
  return into;
};

/** Opens the sockets (one command per client), then runs every client's closed loop at once. */
async function loadRow(
  name: string,
  clients: LoadClient[],
  open: (client: number, count: number) => LoadCommand,
  total: number,
  around: <T>(run: () => Promise<T>) => Promise<T> = (run) => run(),
  schedule: { durationMs: number; intervalMs?: number; warmupMs?: number } = { durationMs: DURATION_S * 1000, warmupMs: WARMUP_S * 1000 },
): Promise<Row> {
  const shares = split(total, clients.length);
  const t0 = performance.now();
  const opened = await Promise.all(clients.map((c, i) => c.ask<OpenReply>(open(i, shares[i]))));
  const setupMs = performance.now() - t0;
  const errorKinds: Record<string, number> = {};
  for (const o of opened) merge(errorKinds, o.errors);
  // A closed loop's warm-up is the same loop, unrecorded (an open loop times its warm-up apart itself).
  const closedWarmupMs = schedule.intervalMs ? 0 : (schedule.warmupMs ?? 0);
  if (closedWarmupMs > 0) {
    for (const r of await Promise.all(clients.map((c) => c.ask<RunReply>({ op: 'run', durationMs: closedWarmupMs })))) merge(errorKinds, r.errors);
  }
  const runs = await around(() => Promise.all(clients.map((c) => c.ask<RunReply>({ op: 'run', ...schedule }))));
  const lat = latencyRecorder();
  const warm = latencyRecorder();
  const latenciesMs: number[] = [];
  let done = 0;
  let warmed = 0;
  for (const r of runs) {
    for (const us of r.latenciesUs) {
      lat.record(us / 1000);
      latenciesMs.push(us / 1000);
    }
    for (const us of r.warmupLatenciesUs ?? []) warm.record(us / 1000);
    done += r.latenciesUs.length;
    warmed += r.warmupLatenciesUs?.length ?? 0;
    merge(errorKinds, r.errors);
  }
  const seconds = Math.max(...runs.map((r) => r.seconds));
  const s = lat.summary();
  const errors = Object.values(errorKinds).reduce((a, b) => a + b, 0);
  return { name, perSecond: done / seconds, p50: s.p50, p99: s.p99, latenciesMs, warmupP99: warmed > 0 ? warm.summary().p99 : null, answered: done + warmed, errors, errorKinds, opened: opened.reduce((n, o) => n + o.opened, 0), setupMs };
}

async function withClients<T>(n: number, f: (clients: LoadClient[]) => Promise<T>): Promise<T> {
  const clients = Array.from({ length: n }, () => new LoadClient());
  try {
    return await f(clients);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}

/** A published agent live on a messaging connector: what a webchat widget is configured with. */
async function messagingProject(p: Platform, name: string) {
  const c = await chatProject(p, { name });
  const connector = await admin(p)('POST', '/connectors', { account_id: c.accountId, project_id: c.agentId, kind: 'messaging', environment: 'live', host: HOST });
  if (connector.status !== 201) throw new Error(`messaging connector: ${connector.status} ${connector.text}`);
  return { token: connector.body.token as string };
}

const messagingCommand = (base: string, token: string, join: boolean, concurrency: number) => (lane: number, count: number): LoadCommand => ({
  op: 'messaging',
  localAddress: loopback(),
  base,
  connectorToken: token,
  host: HOST,
  sessions: count,
  join,
  text: TEXT,
  concurrency,
  lane,
});


/**
 * Watches an idle platform (sockets open, no traffic) for `ms`: the share of a core it uses and the most
 * actors live at once. Nothing should run while nobody talks.
 */
async function watchIdle(p: Platform, ms: number): Promise<{ cpuPercent: number; maxLive: number }> {
  const pid = p.child.pid!;
  const cpu0 = cpuSeconds(pid);
  const t0 = performance.now();
  let maxLive = 0;
  while (performance.now() - t0 < ms) {
    maxLive = Math.max(maxLive, await liveActors(p));
    await new Promise((r) => setTimeout(r, 1000));
  }
  return { cpuPercent: ((cpuSeconds(pid) - cpu0) / ((performance.now() - t0) / 1000)) * 100, maxLive };
}

/** The distinct error lines the platform logged (pino JSON on stdout), for a run that saw errors. */
function platformErrors(p: Platform, max = 5): string[] {
  const seen = new Map<string, number>();
  for (const line of p.stdout().split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const l = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } };
      if ((l.level ?? 0) < 50) continue;
      const k = `${l.msg ?? ''}${l.err?.message ? `: ${l.err.message}` : ''}`.replace(/[0-9a-f]{8,}|[A-Za-z0-9_-]{20,}/g, '…').slice(0, 200);
      seen.set(k, (seen.get(k) ?? 0) + 1);
    } catch {
      /* not a log line */
    }
  }
  return [...seen].slice(0, max).map(([k, n]) => `  platform logged ${n} × ${k}`);
}

async function liveActors(p: Platform): Promise<number> {
  const r = await http(p.edge, 'GET', '/admin/v1/runtime', { headers: { authorization: `Bearer ${p.operatorToken}` } });
  return (r.body.workers as Array<{ liveActors: number }>).reduce((n, w) => n + w.liveActors, 0);
}

async function until(check: () => Promise<boolean>, timeoutMs: number, everyMs = 250): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return false;
}

/** Starts a NATS deployment of the Messaging API: a nats-server, an edge + socket process and a worker. */
async function startNatsMessaging() {
  const nats = await startNats();
  const env = { ...PLATFORM_ENV, NATS_URL: nats.url, SHARDS: '64', PASSIVATE_AFTER_MS: '600000' };
  const edge = await startPlatform({ roles: ['edge', 'socket'], env });
  const worker = await startPlatform({ roles: ['worker'], dataDir: edge.dataDir, env: { ...env, OPERATOR_TOKEN: edge.operatorToken } });
  await until(async () => {
    const r = (await http(edge.edge, 'GET', '/admin/v1/runtime', { headers: { authorization: `Bearer ${edge.operatorToken}` } })).body;
    return r.unownedShards?.length === 0 && r.workers?.length === 1;
  }, 20_000);
  return {
    edge,
    stop: async () => {
      await worker.stop();
      await edge.stop();
      await nats.stop();
      removeDir(edge.dataDir);
    },
  };
}

async function load(): Promise<string[]> {
  const rows: Row[] = [];
  const notes: string[] = [];
  const bare = fork(fileURLToPath(new URL('./bare-uws.js', import.meta.url)));
  const { port } = await new Promise<{ port: number }>((r) => bare.once('message', (m) => r(m as { port: number })));
  rows.push(
    await withClients(CLIENTS, (clients) =>
      loadRow('bare uWebSockets.js echo (own process)', clients, (_i, count) => ({ op: 'echo', url: `ws://127.0.0.1:${port}/ws`, sockets: count, payload: FRAME, localAddress: loopback() }), SESSIONS),
    ),
  );
  bare.kill();

  const inspectPort = process.env.BENCH_PROFILE ? await freePort() : null;
  const embedded = await startPlatform({ env: { ...PLATFORM_ENV, NODE_OPTIONS: inspectPort ? `--inspect=127.0.0.1:${inspectPort}` : undefined } });
  try {
    const { token } = await messagingProject(embedded, 'Messaging Bench');
    const pid = embedded.child.pid!;
    const cpu = { all: 0, main: 0 };
    const row = await withClients(CLIENTS, (clients) =>
      loadRow('messaging, embedded (one process)', clients, messagingCommand(embedded.socket, token, true, 50), SESSIONS, async (run) => {
        const [all, main] = [cpuSeconds(pid), cpuSeconds(pid, { thread: pid })];
        try {
          return await profiled(inspectPort, run);
        } finally {
          [cpu.all, cpu.main] = [cpuSeconds(pid) - all, cpuSeconds(pid, { thread: pid }) - main];
        }
      }),
    );
    rows.push(row);
    // Per message of the timed run: steadier from run to run than the rate, which follows the VM's speed.
    const perMessage = (seconds: number) => `${fmt((seconds * 1e6) / Math.max(1, row.answered))} µs`;
    notes.push(`  messaging, embedded: the platform's CPU per message ${perMessage(cpu.all)}, its main thread ${perMessage(cpu.main)}`);
    notes.push(...platformErrors(embedded));
  } finally {
    await embedded.stop();
    removeDir(embedded.dataDir);
  }

  if (WITH_NATS) {
    const cluster = await startNatsMessaging();
    try {
      const { token } = await messagingProject(cluster.edge, 'Messaging Bench NATS');
      rows.push(await withClients(CLIENTS, (clients) => loadRow('messaging over NATS (edge+socket, worker)', clients, messagingCommand(cluster.edge.socket, token, true, 50), SESSIONS)));
      notes.push(...platformErrors(cluster.edge));
    } finally {
      await cluster.stop();
    }
  }

  const base = rows[0].perSecond;
  const width = Math.max(...rows.map((r) => r.name.length));
  const out = rows.map(
    (r) =>
      `  ${r.name.padEnd(width)}  ${fmt(r.perSecond)} /s  p50 ${fmt(r.p50, 2)} ms  p99 ${fmt(r.p99, 2)} ms  ${fmt((r.perSecond / base) * 100, 1)} % of bare` +
      `  (${fmt(r.opened)} sockets opened in ${fmt(r.setupMs / 1000, 1)} s)${r.errors ? `  errors ${r.errors}: ${JSON.stringify(r.errorKinds)}` : ''}`,
  );
  const embeddedRow = rows[1];
  if (embeddedRow && embeddedRow.perSecond === 0) out.push('  target: no round trip completed on the Messaging API: no verdict');
  else if (embeddedRow) {
    const rateMet = embeddedRow.perSecond >= base / 10;
    out.push(`  target: embedded ≥ 10 % of the bare echo measured in this run (${rateMet ? 'met' : 'NOT met'})`);
  }
  out.push(...notes);
  return [`messaging load — ${SESSIONS} concurrent sessions, ${CLIENTS} load-client process(es), ${DURATION_S} s per run after ${WARMUP_S} s of warm-up, ${FRAME.length}-byte user frames`, ...out];
}

/**
 * The open loop: OPEN_SESSIONS joined sessions on the embedded platform, each sending a user message every
 * OPEN_INTERVAL_MS; the latency from when a message was due to the agent's message. Its baseline: the same
 * load clients, sockets and schedule against the bare echo server, which is the load generator's own
 * latency on this machine (its clients share the cores with the server).
 */
async function openLoop(): Promise<string[]> {
  const clients = Math.max(CLIENTS, Math.ceil(OPEN_SESSIONS / SOCKETS_PER_CLIENT));
  const schedule = { durationMs: OPEN_S * 1000, intervalMs: OPEN_INTERVAL_MS, warmupMs: WARMUP_S * 1000 };
  const bare = fork(fileURLToPath(new URL('./bare-uws.js', import.meta.url)));
  let baseline: Row;
  try {
    const { port } = await new Promise<{ port: number }>((r) => bare.once('message', (m) => r(m as { port: number })));
    baseline = await withClients(clients, (cs) =>
      loadRow('bare echo, open loop', cs, (_i, count) => ({ op: 'echo', url: `ws://127.0.0.1:${port}/ws`, sockets: count, payload: FRAME, localAddress: loopback() }), OPEN_SESSIONS, undefined, schedule),
    );
  } finally {
    bare.kill();
  }
  const timings = process.env.BENCH_TIMINGS === '1';
  const inspectPort = process.env.BENCH_PROFILE ? await freePort() : null;
  const offered = (OPEN_SESSIONS * 1000) / OPEN_INTERVAL_MS;
  const lines: string[] = [];
  const runs: Row[] = [];
  let steps: string | undefined;
  // Each run on a fresh platform: the p99 of one run spreads widely on a shared machine (bench/README.md,
  // thirteenth session), so the verdict is the median run's, with every run's figure beside it.
  for (let run = 1; run <= OPEN_RUNS; run++) {
    const profile = run === 1 ? inspectPort : null;
    const p = await startPlatform({ env: { ...PLATFORM_ENV, SB_TIMINGS: timings && run === 1 ? '1' : undefined, NODE_OPTIONS: profile ? `--inspect=127.0.0.1:${profile}` : undefined } });
    try {
      const { token } = await messagingProject(p, 'Messaging Open Loop');
      const pid = p.child.pid!;
      const cpu = { all: 0, main: 0, threads: [] as number[] };
      const row = await withClients(clients, (cs) =>
        loadRow('messaging, embedded, open loop', cs, messagingCommand(p.socket, token, true, 50), OPEN_SESSIONS, async (r) => {
          const [all, main, threads] = [cpuSeconds(pid), cpuSeconds(pid, { thread: pid }), threadCpuSeconds(pid)];
          try {
            return await profiled(profile, r);
          } finally {
            [cpu.all, cpu.main] = [cpuSeconds(pid) - all, cpuSeconds(pid, { thread: pid }) - main];
            const used = [...threadCpuSeconds(pid)].map(([tid, s]) => s - (threads.get(tid) ?? 0));
            cpu.threads = used.sort((a, b) => b - a).slice(0, 6);
          }
        }, schedule),
      );
      // Per answered message over the warm-up and the timed run: steadier than the latencies from run to run.
      const perMessage = (seconds: number) => `${fmt((seconds * 1e6) / Math.max(1, row.answered))} µs`;
      runs.push(row);
      if (run === 1) {
        lines.push(
          `messaging open loop — ${fmt(row.opened)} sessions (opened in ${fmt(row.setupMs / 1000, 1)} s), one user message each every ${fmt(OPEN_INTERVAL_MS / 1000, 1)} s (${fmt(offered)} /s offered), ${OPEN_S} s after ${WARMUP_S} s of warm-up, ${OPEN_RUNS} run(s) on a fresh platform each`,
        );
      }
      lines.push(
        `  run ${run}: user message → agent message: ${fmt(row.perSecond)} /s answered, p50 ${fmt(row.p50, 2)} ms, p99 ${fmt(row.p99, 2)} ms${row.errors ? `, errors ${row.errors}: ${JSON.stringify(row.errorKinds)}` : ''}` +
          (row.warmupP99 === null ? '' : ` (the warm-up alone: p99 ${fmt(row.warmupP99, 2)} ms)`) +
          `; platform CPU per message ${perMessage(cpu.all)}, its main thread ${perMessage(cpu.main)} (busiest threads: ${cpu.threads.map(perMessage).join(', ')})`,
        ...platformErrors(p),
      );
    } finally {
      await p.stop();
      removeDir(p.dataDir);
    }
    // BENCH_TIMINGS=1: the first run's step timings (`SB_TIMINGS`), printed by the platform at exit.
    if (timings && run === 1) steps = /timings \(ms[\s\S]*/.exec(p.stdout())?.[0];
  }
  const p99s = runs.map((r) => (r.errors === 0 ? r.p99 : Number.POSITIVE_INFINITY)).sort((a, b) => a - b);
  const median = p99s[Math.floor((p99s.length - 1) / 2)];
  const met = p99s.filter((v) => v < 50).length;
  // The verdict: every run's timed messages together. One run's p99 rests on its slowest 1 % (about 300
  // messages in 30 s), which one major GC's backlog can fill alone, so it spreads widely from run to run here
  // (bench/README.md, twenty-sixth session); pooled, each run weighs by its messages. A message not answered
  // (an error) counts as late.
  const pooled = latencyRecorder();
  let late = 0;
  let timed = 0;
  for (const r of runs) {
    for (const ms of r.latenciesMs) pooled.record(ms);
    // An unanswered message as the recorder's longest latency (a minute), later than any answer.
    for (let i = 0; i < r.errors; i++) pooled.record(60_000);
    late += r.latenciesMs.filter((ms) => ms >= 50).length + r.errors;
    timed += r.latenciesMs.length + r.errors;
  }
  const all = pooled.summary();
  const pooledP99 = all.p99;
  lines.push(
    `  baseline: the same clients and schedule against the bare uWebSockets.js echo: p50 ${fmt(baseline.p50, 2)} ms, p99 ${fmt(baseline.p99, 2)} ms${baseline.errors ? `, errors ${baseline.errors}` : ''}`,
    `  p99 of the median run: ${fmt(median, 2)} ms (runs: ${runs.map((r) => fmt(r.p99, 1)).join(', ')} ms)`,
    `  all ${runs.length} runs' ${fmt(timed)} timed messages together: p50 ${fmt(all.p50, 2)} ms, p99 ${fmt(pooledP99, 2)} ms; at 50 ms or later (or unanswered): ${fmt(late)}, ${fmt((late / Math.max(1, timed)) * 100, 2)} %`,
    `  target: p99 under 50 ms (${pooledP99 < 50 ? 'met' : 'NOT met'} by all runs together; by the median run: ${median < 50 ? 'met' : 'not met'}; met in ${met} of ${runs.length} runs)`,
  );
  if (steps) lines.push(steps.trimEnd());
  return lines;
}

/** The platform process's resident memory from /proc: total and anonymous (heap, buffers; not mapped files). */
function rss(pid: number) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), anon: kb('RssAnon') };
}

/** A DevTools-protocol session with a platform process started with `--inspect=127.0.0.1:<port>`. */
async function inspector(port: number) {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{ webSocketDebuggerUrl: string }>;
  const ws = new WebSocket(targets[0].webSocketDebuggerUrl, { perMessageDeflate: false });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  let id = 0;
  return {
    call: (method: string, params: Record<string, unknown> = {}) =>
      new Promise<any>((resolve) => {
        const my = ++id;
        const onMessage = (data: WebSocket.RawData) => {
          const m = JSON.parse(String(data));
          if (m.id !== my) return;
          ws.off('message', onMessage);
          resolve(m.result);
        };
        ws.on('message', onMessage);
        ws.send(JSON.stringify({ id: my, method, params }));
      }),
    close: () => ws.close(),
  };
}

/** Heap used by the platform process after two full collections, asked through its inspector. */
async function heapAfterGc(inspectPort: number): Promise<number | null> {
  try {
    const i = await inspector(inspectPort);
    await i.call('HeapProfiler.collectGarbage');
    await i.call('HeapProfiler.collectGarbage');
    const usage = await i.call('Runtime.getHeapUsage');
    i.close();
    return usage.usedSize as number;
  } catch {
    return null;
  }
}

/**
 * With BENCH_PROFILE=<file>, a CPU profile of the embedded platform process over the timed messaging run or
 * the open loop (sessions already open) or, for the idle part, over the opening of the sessions: where the time goes (open
 * the file in Chrome DevTools).
 */
async function profiled<T>(inspectPort: number | null, run: () => Promise<T>): Promise<T> {
  const file = process.env.BENCH_PROFILE;
  if (!file || inspectPort === null) return run();
  const i = await inspector(inspectPort);
  // A file named *.heapprofile: where the allocations come from (every allocation sampled, also those the
  // young generation's collections freed, which are most of a message's) instead of where the time goes.
  const heap = file.endsWith('.heapprofile');
  if (heap) {
    await i.call('HeapProfiler.enable');
    await i.call('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  } else {
    await i.call('Profiler.enable');
    await i.call('Profiler.start');
  }
  try {
    return await run();
  } finally {
    const { profile } = await i.call(heap ? 'HeapProfiler.stopSampling' : 'Profiler.stop');
    writeFileSync(file, JSON.stringify(profile));
    i.close();
    console.log(`${heap ? 'Allocation' : 'CPU'} profile of the embedded platform written to ${file}`);
  }
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });

const openFileLimit = (pid: number | 'self') => Number(/^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'))?.[1] ?? 1024);

/** The idle baseline: the same number of sockets held open on the bare echo server, its VmRSS per socket. */
async function bareIdle(count: number): Promise<{ opened: number; ms: number; perSocket: number }> {
  const bare = fork(fileURLToPath(new URL('./bare-uws.js', import.meta.url)));
  try {
    const { port } = await new Promise<{ port: number }>((r) => bare.once('message', (m) => r(m as { port: number })));
    const mem0 = rss(bare.pid!);
    return await withClients(Math.ceil(count / SOCKETS_PER_CLIENT), async (clients) => {
      const shares = split(count, clients.length);
      const t0 = performance.now();
      const opened = (await Promise.all(clients.map((c, i) => c.ask<OpenReply>({ op: 'echo', url: `ws://127.0.0.1:${port}/ws`, sockets: shares[i], payload: FRAME, localAddress: loopback() })))).reduce((n, o) => n + o.opened, 0);
      const ms = performance.now() - t0;
      return { opened, ms, perSocket: (rss(bare.pid!).rss - mem0.rss) / Math.max(1, opened) };
    });
  } finally {
    bare.kill();
  }
}

async function idle(): Promise<string[]> {
  const inspectPort = await freePort();
  const p = await startPlatform({ env: { ...PLATFORM_ENV, PASSIVATE_AFTER_MS: String(PASSIVATE_AFTER_MS), NODE_OPTIONS: `--inspect=127.0.0.1:${inspectPort}` } });
  const pid = p.child.pid!;
  const out: string[] = [];
  try {
    const { token } = await messagingProject(p, 'Messaging Idle');
    // Each open socket is one descriptor in the platform process: stay under its open-file limit, leaving room
    // for its own files and the load clients' HTTP connections.
    const concurrency = IDLE_CONCURRENCY;
    const clientsNeeded = (n: number) => Math.ceil(n / SOCKETS_PER_CLIENT);
    const room = openFileLimit(pid) - readdirSync(`/proc/${pid}/fd`).length - clientsNeeded(IDLE_SESSIONS) * concurrency - 100;
    const target = Math.min(IDLE_SESSIONS, room);
    if (target < IDLE_SESSIONS) {
      out.push(`  note: ${fmt(IDLE_SESSIONS)} sessions asked for; the platform's open-file limit (${fmt(openFileLimit(pid))}) allows ${fmt(target)} sockets, so ${fmt(target)} were opened`);
    }
    const baseline = await bareIdle(target);
    out.push(`  baseline: bare uWebSockets.js echo server holding ${fmt(baseline.opened)} idle sockets (opened in ${fmt(baseline.ms / 1000, 1)} s): ${fmt(baseline.perSocket)} bytes VmRSS per socket`);
    // Settle before the baseline: the project set-up's conversations and caches are part of it, not of the sessions.
    await until(async () => (await liveActors(p)) === 0, 30_000);
    const heap0 = await heapAfterGc(inspectPort);
    const mem0 = rss(pid);

    const result = await withClients(clientsNeeded(target), async (clients) => {
      const shares = split(target, clients.length);
      const t0 = performance.now();
      const opened = await profiled(inspectPort, () => Promise.all(clients.map((c, i) => c.ask<OpenReply>(messagingCommand(p.socket, token, IDLE_JOIN, concurrency)(i, shares[i])))));
      const openMs = performance.now() - t0;
      const errors: Record<string, number> = {};
      for (const o of opened) merge(errors, o.errors);
      const live = await liveActors(p);
      const heapLive = await heapAfterGc(inspectPort);
      const memLive = rss(pid);
      const passivated = await until(async () => (await liveActors(p)) === 0, 60_000 + PASSIVATE_AFTER_MS);
      const liveAfter = await liveActors(p);
      const heap1 = await heapAfterGc(inspectPort);
      const mem1 = rss(pid);
      const watch = await watchIdle(p, IDLE_WATCH_S * 1000);
      const counts = await Promise.all(clients.map((c) => c.ask<{ open: number; closes: Record<string, number> }>({ op: 'count' })));
      const stillOpen = counts.reduce((n, c) => n + c.open, 0);
      const closedByServer = counts.reduce((all, c) => merge(all, c.closes), {} as Record<string, number>);
      return { opened: opened.reduce((n, o) => n + o.opened, 0), retried: opened.reduce((n, o) => n + o.retried, 0), openMs, errors, live, heapLive, memLive, passivated, liveAfter, heap1, mem1, watch, stillOpen, closedByServer };
    });
    const n = Math.max(1, result.stillOpen);
    const per = (bytes: number) => `${fmt(bytes / n)} bytes`;
    out.unshift(
      `idle capacity — ${fmt(target)} sessions, ${IDLE_JOIN ? 'each joined by the agent' : 'not joined (token, session, socket, history replay)'}, PASSIVATE_AFTER_MS ${PASSIVATE_AFTER_MS}`,
    );
    out.push(
      `  opened ${fmt(result.opened)} sessions with a socket each in ${fmt(result.openMs / 1000, 1)} s: ${fmt(result.opened / (result.openMs / 1000))} sessions/s` +
        `${result.retried ? `, ${result.retried} HTTP 429 retried` : ''}${Object.keys(result.errors).length ? `, errors ${JSON.stringify(result.errors)}` : ''}`,
      `  with their actors live (${fmt(result.live)} live actors): ${per(result.memLive.rss - mem0.rss)} VmRSS, ${per(result.memLive.anon - mem0.anon)} anonymous RSS` +
        `${result.heapLive !== null && heap0 !== null ? `, ${per(result.heapLive - heap0)} heap` : ''} per session`,
      `  passivated (${result.passivated ? 'all' : 'NOT all'}: ${fmt(result.liveAfter)} live actors left), ${fmt(result.stillOpen)} sockets still open: ` +
        `${per(result.mem1.rss - mem0.rss)} VmRSS, ${per(result.mem1.anon - mem0.anon)} anonymous RSS` +
        `${result.heap1 !== null && heap0 !== null ? `, ${per(result.heap1 - heap0)} heap used after GC` : ' (heap: inspector not reachable)'} per session`,
      ...(Object.keys(result.closedByServer).length ? [`  sockets the server closed (code: count): ${JSON.stringify(result.closedByServer)}`] : []),
      `  then idle for ${IDLE_WATCH_S} s with every socket open: the platform used ${fmt(result.watch.cpuPercent, 1)} % of a core, up to ${fmt(result.watch.maxLive)} live actors at once`,
      `  target: under 10 KB per session once passivated: by VmRSS ${(result.mem1.rss - mem0.rss) / n < 10 * 1024 ? 'met' : 'NOT met'}, ` +
        `by anonymous RSS (VmRSS less LMDB's memory-mapped file pages) ${(result.mem1.anon - mem0.anon) / n < 10 * 1024 ? 'met' : 'NOT met'}`,
      `  platform process: VmRSS ${fmt(mem0.rss / 2 ** 20, 1)} MB before, ${fmt(result.mem1.rss / 2 ** 20, 1)} MB after`,
      ...platformErrors(p),
    );
  } finally {
    await p.stop();
    removeDir(p.dataDir);
  }
  return out;
}

async function main() {
  console.log(`messaging benchmark — ${new Date().toISOString().slice(0, 10)}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}, bench process open-file limit ${openFileLimit('self')}`);
  if (MODES.has('load')) for (const l of await load()) console.log(l);
  if (MODES.has('open')) for (const l of await openLoop()) console.log(l);
  if (MODES.has('idle')) for (const l of await idle()) console.log(l);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
