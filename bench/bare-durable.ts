/**
 * The Chat benchmark's durable baseline (issue 12): a bare Fastify route in its own process that does, per
 * request, what a chat turn must at least do to be durable, and nothing else: one read of a ~3 KB record, then
 * a 400-byte append and a rewrite of the 3 KB record, both in one flushed group commit of the platform's own
 * embedded store (`store/`, so the same LMDB settings and the same commit path), answered once durable.
 * Each connection's body names its record (`conversation_id`); the data dir is a fresh temporary one.
 */
import Fastify from 'fastify';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type Doc } from '../store/mod.js';

interface Conversation extends Doc {
  v: number;
  body: string;
}
interface Entry extends Doc {
  text: string;
}

const dir = mkdtempSync(join(tmpdir(), 'sb-bench-durable-'));
const store = await openStore({ dataDir: dir });
const records = store.collection<Conversation>({ name: 'bench_conversations' });
const journal = store.collection<Entry>({ name: 'bench_journal' });
const RECORD = 'r'.repeat(3 * 1024);
const APPEND = 'a'.repeat(400);
let seq = 0;

const app = Fastify({ logger: false });
app.post('/durable', async (req) => {
  const id = (req.body as { conversation_id?: string })?.conversation_id || 'x';
  const stored = await records.get(id);
  const v = (stored?.v ?? 0) + 1;
  // Issued in the same tick: the store's group commit makes both durable in one flushed transaction.
  await Promise.all([
    journal.insert({ id: `${id}:${++seq}`, text: APPEND }),
    records.putNewer({ id, v, body: RECORD }, 'v'),
  ]);
  return { conversation_id: id, response: 'ok', end_conversation: false };
});
await app.listen({ host: '127.0.0.1', port: 0 });
process.send?.({ port: (app.server.address() as { port: number }).port });
const stop = async () => {
  await app.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
};
process.on('SIGTERM', () => void stop());
process.on('disconnect', () => void stop());
