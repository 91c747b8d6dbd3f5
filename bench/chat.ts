/**
 * Chat API benchmark (issue: conversations): turns per second and p50/p99 latency with 64 concurrent
 * conversations (one keep-alive connection each, each playing 20-turn conversations), embedded and over NATS, next to a bare
 * Fastify route in the same run. Every turn is durable (snapshot and record written) before its reply.
 * Run: `npm run build && node dist/bench/chat.js` (needs nats-server for the NATS row).
 */
import { fork } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { chatProject } from '../test/helpers/chat.js';
import { startCluster } from '../test/helpers/cluster.js';
import { removeDir, startPlatform } from '../test/helpers/platform.js';
import { fmt } from './stats.js';

const DURATION_S = Number(process.env.BENCH_S ?? 10);
const CONVERSATIONS = 64;

type Row = { name: string; rps: number; p50: number; p99: number; errors: number };

async function load(url: string, headers: Record<string, string>, bodies: string[]): Promise<Omit<Row, 'name'>> {
  let i = 0;
  const result = await autocannon({
    url,
    method: 'POST',
    connections: CONVERSATIONS,
    duration: DURATION_S,
    headers: { 'content-type': 'application/json', ...headers },
    // One conversation per connection: its turns are sequential, as a chat user's are.
    setupClient: (client: { setBody: (b: string) => void }) => client.setBody(bodies[i++ % bodies.length]),
  } as autocannon.Options);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.non2xx };
}

/**
 * Each connection plays conversations of TURNS turns: a create (the opening turn), then TURNS - 1 responds
 * on that conversation, then a new one, as chat users come and go. Rates count every turn.
 */
const TURNS = Number(process.env.BENCH_TURNS ?? 20);

async function chatRow(name: string, edge: Parameters<typeof chatProject>[0]): Promise<Row> {
  const c = await chatProject(edge, { name });
  const base = `/v1/${c.accountId}/${c.agentId}/chat`;
  const result = await autocannon({
    url: edge.edge,
    connections: CONVERSATIONS,
    duration: DURATION_S,
    headers: { 'content-type': 'application/json', 'X-API-KEY': c.chatKey, 'X-TOKEN': c.token },
    requests: [
      {
        method: 'POST',
        path: `${base}/create`,
        body: '{}',
        onResponse: (_status: number, body: string, context: Record<string, unknown>) => {
          context.id = JSON.parse(body).conversation_id;
        },
      },
      ...Array.from({ length: TURNS - 1 }, () => ({
        method: 'POST' as const,
        path: `${base}/respond`,
        setupRequest: (req: Record<string, unknown>, context: Record<string, unknown>) => ({
          ...req,
          body: JSON.stringify({ conversation_id: context.id, message: 'When do you open on Monday?' }),
        }),
      })),
    ],
  } as autocannon.Options);
  return { name, rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.non2xx };
}

async function main() {
  const rows: Row[] = [];
  const bare = fork(fileURLToPath(new URL('./bare-fastify.js', import.meta.url)));
  const { port } = await new Promise<{ port: number }>((r) => bare.once('message', (m) => r(m as { port: number })));
  rows.push({ name: 'bare Fastify route (own process)', ...(await load(`http://127.0.0.1:${port}/bare`, {}, [JSON.stringify({ conversation_id: 'x', message: 'When do you open on Monday?' })])) });
  bare.kill();

  const embedded = await startPlatform({ env: { LOG_LEVEL: 'error' } });
  rows.push(await chatRow('chat respond, embedded (one process)', embedded));
  await embedded.stop();
  removeDir(embedded.dataDir);

  const cluster = await startCluster({ workers: 1, leaseTtlMs: 3000, passivateAfterMs: 600_000 });
  rows.push(await chatRow('chat respond over NATS (edge + worker)', cluster.edge));
  await cluster.stop();

  const base = rows[0].rps;
  console.log(`\nchat benchmark — ${new Date().toISOString().slice(0, 10)}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${CONVERSATIONS} concurrent conversations of ${TURNS} turns, ${DURATION_S} s per run`);
  const width = Math.max(...rows.map((r) => r.name.length));
  for (const r of rows) {
    console.log(`  ${r.name.padEnd(width)}  ${fmt(r.rps)} /s  p50 ${fmt(r.p50, 1)} ms  p99 ${fmt(r.p99, 1)} ms  ${fmt((r.rps / base) * 100, 1)} % of bare${r.errors ? `  errors ${r.errors}` : ''}`);
  }
  console.log('  targets: embedded ≥ 33 % of the bare route, p99 under 20 ms');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
