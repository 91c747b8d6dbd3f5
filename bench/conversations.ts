/**
 * Conversations API benchmark (issue: conversations read layer). Seeds BENCH_CONVERSATIONS (default
 * 200,000) conversations of 10 turns over one week into the store, through the conversations projector
 * (`conversationsProjector`: record, search records, document) applied to synthetic journal entries (one per
 * conversation: started, ten turns, changed, ended; not appended to the journal), in batches of BENCH_BATCH
 * (default 1,000) that share group commits, not through HTTP. Then measures over HTTP against a started platform (embedded, one process),
 * one request at a time for BENCH_S seconds each (default 5):
 *
 * - a 1,000-row page (v3, a random start inside the week),
 * - a transcript search and a semantic search over the week (limit 100),
 * - a week of concurrency,
 *
 * each next to reading the same rows raw from the store (`find` on the same index range, or by id) in this
 * process, in the same run. BENCH_DIR keeps the seeded store between runs (seeding is skipped when it holds
 * the seeded project already).
 * Run: `npm run build && node dist/bench/conversations.js`.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { openStore } from '../store/mod.js';
import { conversationRecords, type ConversationRecord } from '../actors/conversation/record.js';
import { conversationSpans, conversationVectorBuckets } from '../actors/conversation/search.js';
import { conversationDocuments } from '../actors/conversation/document.js';
import { conversationsProjector } from '../actors/conversation/projectors/conversations.js';
import { entryOfRecord } from '../test/helpers/journal-entries.js';
import { createOfflineEmbedder } from '../actors/conversation/embedding.js';
import type { TurnRecord } from '../machines/conversation.js';
import { chatProject } from '../test/helpers/chat.js';
import { conversationsKey, toQuery } from '../test/helpers/conversations.js';
import { removeDir, startPlatform } from '../test/helpers/platform.js';
import { fmt, latencyRecorder } from './stats.js';

const COUNT = Number(process.env.BENCH_CONVERSATIONS ?? 200_000);
const SECONDS = Number(process.env.BENCH_S ?? 5);
const WEEK_START = Date.parse('2026-11-09T00:00:00.000Z');
const WEEK = 7 * 86_400_000;
const BATCH = Number(process.env.BENCH_BATCH ?? 1000);
/** Requests of each kind made before measuring it (BENCH_WARMUP_RUNS). */
const WARMUP_RUNS = Number(process.env.BENCH_WARMUP_RUNS ?? 10);
/** Which queries to measure (comma-separated: page, page-records, transcript, semantic, concurrency); the four targets by default. */
const QUERIES = new Set((process.env.BENCH_QUERIES ?? 'page,transcript,semantic,concurrency').split(',').map((s) => s.trim()));


const TOPICS: Array<[string[], string]> = [
  [['When are you open on Monday?', 'What are your opening hours at the weekend?'], 'We are open from 9am to 5pm, Monday to Friday, and 10am to 2pm on Saturday.'],
  [['Is there parking near the store?', 'Where can I park my car?'], 'Free parking is available behind the building, with spaces for disabled drivers.'],
  [['I want a refund for my order', 'How do I get my money back?'], 'Refunds go back to the original payment method within five working days.'],
  [['My invoice shows the wrong amount', 'Why was I charged twice on the invoice?'], 'I have flagged the invoice for our billing team; they will correct the charge.'],
  [['Can I book an appointment for Tuesday?', 'I need to reschedule my appointment'], 'I can book or move appointments; which day and time suit you best?'],
  [['My parcel has not arrived yet', 'Where is my delivery?'], 'Deliveries take two to four days; your tracking link shows the courier status.'],
  [['The product arrived damaged', 'The screen of my phone is broken'], 'Sorry about that: we will send a replacement and a prepaid return label.'],
  [['Do you sell gift cards?', 'Can I pay with a voucher?'], 'Gift cards and vouchers are accepted in store and online.'],
  [['I forgot my password', 'I cannot log in to my account'], 'Use the reset link on the login page; it is valid for one hour.'],
  [['Can I speak to a manager?', 'Put me through to a person please'], 'I am transferring you to a colleague now.'],
];
const CHANNELS = ['CHAT', 'WEBCHAT', 'SMS', 'VOICE-SIP'];
const VARIANTS = [['var_a', 'London'], ['var_b', 'Paris']];

function pick<T>(xs: T[], r: number): T {
  return xs[Math.floor(r * xs.length) % xs.length];
}

/** One synthetic 10-turn conversation, as the conversation actor would have recorded it. */
function synthetic(projectId: string, accountId: string, i: number): { id: string; record: Omit<ConversationRecord, 'id'> } {
  const start = WEEK_START + Math.floor(((i + Math.random()) / COUNT) * WEEK);
  const topics = [pick(TOPICS, Math.random()), pick(TOPICS, Math.random())];
  const order = `${10000 + Math.floor(Math.random() * 90000)}`;
  const turns: TurnRecord[] = [];
  for (let k = 0; k < 10; k++) {
    const [asks, answer] = topics[k < 5 ? 0 : 1];
    const userAt = new Date(start + k * 20_000).toISOString();
    const agentAt = new Date(start + k * 20_000 + 800).toISOString();
    turns.push({
      user_input: k === 0 ? '' : `${pick(asks, Math.random())}${k === 3 ? ` My order number is ${order}.` : ''}`,
      user_input_dtmf: '', user_input_datetime: userAt, barge_in: false,
      agent_response: k === 0 ? 'Hello, welcome to Acme! How can I help you today?' : answer,
      agent_response_datetime: agentAt, latency: 0.8, translated_user_input: '', english_agent_response: '',
      intents: [], entities: {}, is_ood: false, is_silence: false, metadata: {},
    });
  }
  const end = start + 10 * 20_000;
  const [variantId, variantName] = pick(VARIANTS, Math.random());
  const id = randomUUID();
  return {
    id,
    record: {
      account_id: accountId, project_id: projectId, variant_id: variantId, variant_name: variantName, environment: 'live',
      started_at: new Date(start).toISOString(), ended_at: new Date(end).toISOString(), channel: pick(CHANNELS, Math.random()),
      from_number: '', to_number: '', in_progress: false, num_turns: 10, total_duration: 200, polyai_duration: 200,
      handoff: false, handoff_reason: '', handoff_destination: '', num_silences: 0, num_ood: 0,
      metrics: { CALL_DURATION: '200' },
      state: { from_: '', to: '', conversation_id: id }, turns, integration_attributes: {}, asr_lang_code: 'en-GB', tts_lang_code: 'en-GB',
      function_errors: 0, artifact_version: '', end_reason: 'agent', updated_at: new Date(end).toISOString(), snapshot_version: 1,
    },
  };
}

interface Meta {
  operatorToken: string;
  accountId: string;
  projectId: string;
  key: string;
  count: number;
}

async function main(): Promise<void> {
  const dataDir = process.env.BENCH_DIR ?? mkdtempSync(join(tmpdir(), 'sb-bench-conv-'));
  const metaPath = join(dataDir, 'bench-conversations.json');
  const meta: Meta | null = existsSync(metaPath) ? JSON.parse(readFileSync(metaPath, 'utf8')) : null;
  const operatorToken = meta?.operatorToken ?? `bench-operator-${randomBytes(12).toString('hex')}`;
  const p = await startPlatform({ dataDir, env: { OPERATOR_TOKEN: operatorToken, LOG_LEVEL: 'error' } });
  try {
    await run(p, dataDir, meta, operatorToken);
  } finally {
    await p.stop();
    if (!process.env.BENCH_DIR) removeDir(dataDir);
  }
}

async function run(p: Awaited<ReturnType<typeof startPlatform>>, dataDir: string, meta: Meta | null, operatorToken: string): Promise<void> {
  const metaPath = join(dataDir, 'bench-conversations.json');
  let m: Meta;
  if (meta && meta.count === COUNT) {
    m = meta;
    process.stdout.write(`reusing ${COUNT} seeded conversations in ${dataDir}\n`);
  } else {
    const c = await chatProject(p, { name: 'Bench Co' });
    m = { operatorToken, accountId: c.accountId, projectId: c.agentId, key: await conversationsKey(p, c), count: COUNT };
    const store = await openStore({ dataDir });
    const projector = conversationsProjector({ embedder: createOfflineEmbedder() });
    const t0 = performance.now();
    for (let i = 0; i < COUNT; i += BATCH) {
      const batch = Array.from({ length: Math.min(BATCH, COUNT - i) }, (_, k) => synthetic(m.projectId, m.accountId, i + k));
      await projector.apply(batch.map(({ id, record }, k) => entryOfRecord({ id, ...record } as ConversationRecord, i + k + 1)), store);
      if ((i / BATCH) % 40 === 0) process.stdout.write(`seeded ${i + batch.length} (${fmt((performance.now() - t0) / 1000, 1)} s)\n`);
    }
    const seconds = (performance.now() - t0) / 1000;
    process.stdout.write(`seeding ${fmt(COUNT)} conversations of 10 turns: ${fmt(seconds, 1)} s (${fmt(COUNT / seconds)} /s)\n`);
    await store.close();
    writeFileSync(metaPath, JSON.stringify(m));
  }

  const store = await openStore({ dataDir });
  const records = conversationRecords(store);
  const documents = conversationDocuments(store);
  const spans = conversationSpans(store);
  const url = (q: Record<string, string>, path: string) => new URL(`/${path ? 'v1' : 'v3'}/${m.accountId}/${m.projectId}/conversations${path}?${toQuery(q)}`, p.edge);
  const weekQ = { start_time: new Date(WEEK_START).toISOString(), end_time: new Date(WEEK_START + WEEK).toISOString() };

  /** Runs `op` one at a time for SECONDS; `op` returns the rows' ids (for the raw read) and its HTTP time. */
  async function measure(name: string, op: () => Promise<{ ms: number; raw: () => Promise<unknown[]>; alsoRaw?: () => Promise<unknown[]>; rows: number }>) {
    const http = latencyRecorder();
    const raw = latencyRecorder();
    const alsoRaw = latencyRecorder();
    let also = false;
    let rows = 0;
    let n = 0;
    // Warm-up, not recorded: the first requests of a kind compile its code paths in the platform process.
    for (let w = 0; w < WARMUP_RUNS; w++) await op();
    const samples: number[] = [];
    const end = performance.now() + SECONDS * 1000;
    while (performance.now() < end) {
      const r = await op();
      http.record(r.ms);
      samples.push(r.ms);
      const t0 = performance.now();
      const got = await r.raw();
      raw.record(performance.now() - t0);
      if (r.alsoRaw) {
        const t1 = performance.now();
        await r.alsoRaw();
        alsoRaw.record(performance.now() - t1);
        also = true;
      }
      rows += r.rows;
      n++;
      if (got.length !== r.rows && name !== 'week of concurrency') throw new Error(`${name}: raw read found ${got.length} rows, HTTP ${r.rows}`);
    }
    const h = http.summary();
    const s = raw.summary();
    if (process.env.BENCH_SAMPLES === '1') process.stdout.write(`${name}: ${samples.map((x) => x.toFixed(0)).join(' ')}\n`);
    return { name, n, rows: rows / n, http: h, raw: s, also: also ? alsoRaw.summary() : null };
  }

  /** The time to the response's last byte (the client's JSON parsing is not counted). */
  const timed = async (q: Record<string, string>, path = '') => {
    const t0 = performance.now();
    const res = await fetch(url(q, path), { headers: { 'x-api-key': m.key } });
    const bytes = await res.arrayBuffer();
    const ms = performance.now() - t0;
    const text = Buffer.from(bytes).toString('utf8');
    if (res.status !== 200) throw new Error(`${res.status} ${text.slice(0, 300)}`);
    return { ms, body: JSON.parse(text) };
  };
  const byIds = (ids: string[]) => () => records.find({ id: { $in: ids } });

  // The page cache: this machine's memory reclaim (DAMON) evicts a seeded store's pages within minutes, and a
  // cold 1,000-row page reads ~1,000 scattered records from disk (seconds). One pass over the week first.
  if (process.env.BENCH_WARM !== '0') {
    const t0 = performance.now();
    for (let h = 0; h < WEEK / 3_600_000; h++) {
      const hour = { project_id: m.projectId, environment: 'live', started_at: { $gte: new Date(WEEK_START + h * 3_600_000).toISOString(), $lt: new Date(WEEK_START + (h + 1) * 3_600_000).toISOString() } };
      await records.find(hour);
      await documents.find(hour);
    }
    await spans.find({ project_id: m.projectId });
    await conversationVectorBuckets(store).find({ project_id: m.projectId });
    process.stdout.write(`warmed the page cache: one pass over the week's records, documents and slots (${fmt((performance.now() - t0) / 1000, 1)} s)\n`);
  }

  const results = [];
  // `page-records`: the same page with include_latency=true, which renders records (as v1 does).
  for (const [kind, name, extra] of [['page', '1,000-row page (v3)', {}], ['page-records', '1,000-row page (v3, include_latency: from records)', { include_latency: 'true' }]] as const) {
    if (QUERIES.has(kind)) results.push(await measure(name, async () => {
      const from = WEEK_START + Math.floor(Math.random() * (WEEK - 86_400_000));
      const { ms, body } = await timed({ start_time: new Date(from).toISOString(), end_time: weekQ.end_time, limit: '1000', ...extra });
      const rows = body.conversations;
      const first = rows[0].started_at;
      const last = rows[rows.length - 1].started_at;
      const range = { project_id: m.projectId, environment: 'live', started_at: { $gte: first, $lte: last } };
      return {
        ms,
        rows: rows.length,
        raw: () => (kind === 'page' ? documents : records).find(range, { sort: { started_at: 1 } }),
        alsoRaw: kind === 'page' ? () => records.find(range, { sort: { started_at: 1 } }) : undefined,
      };
    }));
  }
  const terms = ['refund', 'invoice', 'parking', 'appointment', 'password', 'delivery'];
  if (QUERIES.has('transcript')) results.push(await measure('transcript search, one week (limit 100)', async () => {
    const term = pick(terms, Math.random());
    const { ms, body } = await timed({ ...weekQ, query_type: 'transcript', query: `${term} order`, turn_type: 'user', limit: '100' });
    return { ms, rows: body.conversations.length, raw: byIds(body.conversations.map((x: any) => x.id)) };
  }));
  const questions = ['I would like my money back for a broken phone', 'where do I leave the car', 'my bill is wrong', 'change the booking to Tuesday'];
  if (QUERIES.has('semantic')) results.push(await measure('semantic search, one week (limit 100)', async () => {
    const { ms, body } = await timed({ ...weekQ, query_type: 'semantic', query: pick(questions, Math.random()), limit: '100' });
    return { ms, rows: body.conversations.length, raw: byIds(body.conversations.map((x: any) => x.id)) };
  }));
  if (QUERIES.has('concurrency')) results.push(await measure('week of concurrency', async () => {
    const { ms, body } = await timed(weekQ, '/concurrency');
    return {
      ms,
      rows: body.intervals.length,
      raw: () => spans.find({ project_id: m.projectId, environment: 'live', bucket: { $gte: new Date(WEEK_START - 86_400_000).toISOString(), $lt: weekQ.end_time } }),
    };
  }));

  process.stdout.write(`\n${fmt(COUNT)} conversations of 10 turns over one week; one request at a time, ${SECONDS} s each\n\n`);
  process.stdout.write('| query | rows | HTTP p50 | HTTP p99 | raw store read of the same rows p50 / p99 |\n|---|---|---|---|---|\n');
  for (const r of results) {
    const also = r.also ? `; their records: ${fmt(r.also.p50, 1)} / ${fmt(r.also.p99, 1)} ms` : '';
    process.stdout.write(`| ${r.name} | ${fmt(r.rows)} | ${fmt(r.http.p50, 1)} ms | ${fmt(r.http.p99, 1)} ms | ${fmt(r.raw.p50, 1)} / ${fmt(r.raw.p99, 1)} ms${also} (${r.n} runs) |\n`);
  }
  await store.close();
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
