/**
 * What one chat turn costs, step by step, with nothing else running: one conversation at a time, each step
 * timed on its own over 20-turn conversations (the Chat benchmark's shape). This is the floor under the Chat
 * benchmark's figures: a turn under load costs at least the sum of these, plus the HTTP edge.
 * Run: `npm run build && node dist/bench/turn-steps.js` (`BENCH_TURNS_TOTAL` sets how many turns).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createActor } from 'xstate';
import { persistedSnapshot } from '../actors/persisted.js';
import { createOfflineResponder } from '../actors/responder/offline.js';
import { fromEffect } from '../actors/task.js';
import { earliestDeadline, sleepUntil } from '../actors/timers.js';
import { conversationMachine, type ConversationStart, type TurnOutcome, type TurnRecord } from '../machines/conversation.js';
import { openLmdbStore } from '../store/lmdb/store.js';
import { fmt } from './stats.js';

const TOTAL = Number(process.env.BENCH_TURNS_TOTAL ?? 4000);
const TURNS = 20;

const topics = Object.freeze([
  Object.freeze({ name: 'Opening hours', content: 'We are open from 9am to 5pm, Monday to Friday.' }),
  Object.freeze({ name: 'Parking', content: 'Free parking is available behind the building.' }),
]);
const turnRecord = (at: number): TurnRecord => ({
  user_input: 'When do you open on Monday?',
  user_input_dtmf: '',
  user_input_datetime: new Date(at).toISOString(),
  barge_in: false,
  agent_response: topics[0].content,
  agent_response_datetime: new Date().toISOString(),
  latency: 0.001,
  translated_user_input: '',
  english_agent_response: '',
  intents: ['topic:Opening hours'],
  entities: {},
  is_ood: false,
  is_silence: false,
  metadata: {},
});
const outcome = (): TurnOutcome => ({
  at: Date.now(),
  turns: [turnRecord(Date.now())],
  response: topics[0].content,
  state: {},
  handoff: null,
  end: false,
  oodTurns: 0,
  functionErrors: 0,
  variant: null,
  artifactVersion: 'v1',
});

async function main() {
  // The effects answer at once: the turn's own work (the responder) is timed as a step of its own.
  const machine = conversationMachine.provide({
    actors: {
      startConversation: fromEffect(async () => outcome()),
      endConversation: fromEffect(async () => ({ at: Date.now(), state: {}, functionErrors: 0 })),
      sleepUntil,
    },
  });
  const responder = createOfflineResponder();
  const dir = mkdtempSync(join(tmpdir(), 'sb-steps-'));
  const store = await openLmdbStore({ dataDir: dir });
  const start: ConversationStart = {
    accountId: 'acc_bench',
    projectId: 'agt_bench',
    environment: 'live',
    channel: 'CHAT',
    variantId: null,
    integrationAttributes: {},
    asrLangCode: '',
    ttsLangCode: '',
    initialMessage: null,
    fromNumber: '',
    toNumber: '',
    at: Date.now(),
    idleTimeoutMs: 600_000,
  };
  const steps = new Map<string, number>();
  const time = async <T>(name: string, f: () => T | Promise<T>): Promise<T> => {
    const t0 = performance.now();
    const v = await f();
    steps.set(name, (steps.get(name) ?? 0) + performance.now() - t0);
    return v;
  };
  const idle = (actor: ReturnType<typeof createActor<typeof machine>>) =>
    new Promise<void>((resolve) => {
      if (actor.getSnapshot().value === 'idle') return resolve();
      const sub = actor.subscribe((s) => {
        if (s.value === 'idle') {
          sub.unsubscribe();
          resolve();
        }
      });
    });
  let n = 0;
  for (let c = 0; n < TOTAL; c++) {
    const id = `conv-${c}`;
    const actor = createActor(machine, { input: { id } });
    // What the machine emits is the step's journal entry, committed with its snapshot (as the actor host does).
    let emitted: Array<{ type: string; data: Record<string, unknown> }> = [];
    actor.on('*', (e) => void emitted.push(e as never));
    actor.start();
    actor.send({ type: 'START', start });
    await idle(actor);
    let version = 0;
    for (let k = 1; k < TURNS && n < TOTAL; k++, n++) {
      await time('XState: MESSAGE → TURN_DONE → idle (2 macrosteps)', async () => {
        actor.send({ type: 'MESSAGE', message: 'When do you open on Monday?', metadata: {}, integrationAttributes: {}, at: Date.now() });
        // The turn effect is the host's (`ActorKind.effect`): its outcome comes back as `TURN_DONE`.
        actor.send({ type: 'TURN_DONE', output: outcome() });
        await idle(actor);
      });
      await time('responder: offline answer (BM25 over 2 topics)', () =>
        responder.respond({ behavior: 'Hello', topics: topics as never, variables: {}, history: [], tools: [] }, 'When do you open on Monday?'),
      );
      // Encoded by the store inside the commit below, as the host's are.
      const data = await time('snapshot: persisted form', () => {
        const persisted = persistedSnapshot(actor);
        earliestDeadline(persisted);
        return { s: persisted, a: [] };
      });
      const events = emitted;
      emitted = [];
      await time('store: snapshot + journal entry, one durable commit', () =>
        store.snapshots.putMany([{ key: `conversation/${id}`, data, expectedVersion: version, fence: 1, shard: 0, deadline: null, step: { value: actor.getSnapshot().value, events } }]),
      );
      version++;
    }
    actor.stop();
  }
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  const width = Math.max(...[...steps.keys()].map((k) => k.length));
  console.log(`\none chat turn, step by step — ${n} turns of ${TURNS}-turn conversations, one at a time (µs per turn, mean):`);
  let sum = 0;
  for (const [name, ms] of steps) {
    sum += ms;
    console.log(`  ${name.padEnd(width)}  ${fmt((ms * 1000) / n, 1).padStart(8)}`);
  }
  console.log(`  ${'sum'.padEnd(width)}  ${fmt((sum * 1000) / n, 1).padStart(8)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
