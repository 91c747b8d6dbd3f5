/**
 * Function sandbox benchmark: what a project-function call costs in the sandbox (QuickJS in a sandbox process,
 * a fresh runtime per call) next to the same function called directly in this process, and what a function
 * adds to a chat turn, next to a chat turn without one, all in the same run.
 * Run: `npm run build && node dist/bench/sandbox.js` (`BENCH_S` seconds per row, default 5).
 */
import { cpus } from 'node:os';
import { createFunctionSandbox, type ConvInput } from '../actors/functions/mod.js';
import { chatProject } from '../test/helpers/chat.js';
import { removeDir, startPlatform } from '../test/helpers/platform.js';
import { chatLoad } from './chat-load.js';
import { closedLoop, fmt } from './stats.js';

const DURATION_MS = Number(process.env.BENCH_S ?? 5) * 1000;
const CONVERSATIONS = 64;
const TURN = `function turn(conv, message) {
  conv.state.turns = (conv.state.turns ?? 0) + 1;
  conv.state.last = message;
  if (message.includes('balance')) return 'Your balance is ' + conv.state.turns;
}`;

const conv = (state: Record<string, unknown>): ConvInput => ({
  conversation_id: 'bench',
  channel: 'webchat',
  environment: 'live',
  variant: null,
  state,
  integration_attributes: { tier: 'gold' },
  metadata: {},
  sip_headers: {},
  variables: { greeting: 'Hello' },
});

type Row = { name: string; perSecond: number; p50: number; p99: number; note?: string };

async function perCall(): Promise<Row[]> {
  const rows: Row[] = [];
  // Baseline: the same function, compiled once in this process and called with a plain conv object.
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  const plain = new Function(`return (${TURN})`)() as (c: ConvInput & { say?: unknown }, m: string) => unknown;
  rows.push({ name: 'plain function call (this process, no sandbox)', ...(await closedLoop(async () => plain(conv({ turns: 3 }), 'hello'), 1, DURATION_MS)) });

  const coldStart = performance.now();
  const sandbox = createFunctionSandbox({ processes: 2 });
  await sandbox.start();
  const first = await sandbox.invoke({ functions: { turn: TURN }, name: 'turn', conv: conv({}), args: ['hello'], project: 'p' });
  const coldMs = performance.now() - coldStart;
  if (!first.ok) throw new Error(`sandbox call failed: ${first.error.message}`);

  const fresh = await closedLoop(async () => sandbox.invoke({ functions: { turn: TURN }, name: 'turn', conv: conv({}), args: ['hello'], project: 'p' }), 1, DURATION_MS);
  rows.push({ name: 'sandbox call, a new conversation each call', ...fresh });
  // A conversation further on: its state carried in and out of every call.
  const state: Record<string, unknown> = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`key${i}`, `value ${i} `.repeat(8)]));
  const reused = await closedLoop(async () => {
    const r = await sandbox.invoke({ functions: { turn: TURN }, name: 'turn', conv: conv(state), args: ['hello'], project: 'p' });
    if (r.ok) Object.assign(state, r.conv.state);
  }, 1, DURATION_MS);
  rows.push({ name: 'sandbox call, same conversation (20 state keys)', ...reused });
  const parallel = await closedLoop(async (i) => sandbox.invoke({ functions: { turn: TURN }, name: 'turn', conv: conv({}), args: ['hello'], project: `p${i % 2}` }), 4, DURATION_MS);
  rows.push({ name: 'sandbox calls, 2 projects × 2 in flight (2 processes)', ...parallel });
  rows.push({ name: 'sandbox cold start (isolation probe, process, first call)', perSecond: 1000 / coldMs, p50: coldMs, p99: coldMs, note: 'once' });
  await sandbox.close();
  return rows;
}

async function chatTurns(): Promise<Row[]> {
  const platform = await startPlatform({ env: { LOG_LEVEL: 'error', CHAT_RATE_PER_KEY: '1000000', CHAT_RATE_PER_PROJECT: '1000000' } });
  const rows: Row[] = [];
  try {
    for (const [name, functions] of [
      ['chat turn without a function', {}],
      ['chat turn with a `turn` function', { turn: TURN }],
    ] as const) {
      const c = await chatProject(platform, { name, functions });
      const run = (duration: number) => chatLoad(platform.edge, c, { connections: CONVERSATIONS, turns: 20, duration });
      await run(2);
      const r = await run(DURATION_MS / 1000);
      rows.push({ name, perSecond: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, note: r.non2xx + r.errors ? `errors ${r.non2xx + r.errors}` : undefined });
    }
  } finally {
    await platform.stop();
    removeDir(platform.dataDir);
  }
  return rows;
}

function print(title: string, rows: Row[]): void {
  const width = Math.max(...rows.map((r) => r.name.length));
  const base = rows[0];
  console.log(`\n${title}`);
  for (const r of rows) {
    const perCallUs = r.note === 'once' ? `${fmt(r.p50, 0)} ms` : `p50 ${fmt(r.p50 * 1000, 0)} µs  p99 ${fmt(r.p99 * 1000, 0)} µs`;
    const ratio = r.note === 'once' ? '' : `  ${fmt(r.perSecond / base.perSecond, 4)} × baseline rate`;
    console.log(`  ${r.name.padEnd(width)}  ${r.note === 'once' ? '' : `${fmt(r.perSecond)} /s  `}${perCallUs}${ratio}${r.note && r.note !== 'once' ? `  ${r.note}` : ''}`);
  }
}

async function main() {
  console.log(`sandbox benchmark — ${new Date().toISOString().slice(0, 10)}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${DURATION_MS / 1000} s per row`);
  print('per call (one caller unless said; baseline: the plain call)', await perCall());
  print(`chat turns, embedded, ${CONVERSATIONS} conversations of 20 turns (baseline: no function)`, await chatTurns());
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
