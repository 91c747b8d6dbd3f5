import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createActor, fromPromise } from 'xstate';
import { decode } from '../actors/protocol.js';
import { sessionKind, sessionTopic, type Published } from '../actors/session/kind.js';
import { sessionRecordsProjector } from '../actors/session/projector.js';
import { sessionRecords } from '../actors/session/record.js';
import { renderStep } from '../actors/session/wire.js';
import type { JournalEntry } from '../store/mod.js';
import { createInprocTransport } from '../actors/transport/inproc.js';
import type { Builder } from '../builder/mod.js';
import { sessionMachine, type AgentReply, type SessionInfo } from '../machines/session.js';
import { openStore, type Store } from '../store/mod.js';
import { removeDir } from './helpers/platform.js';

// The session kind's hooks (answers and publication from what a step committed) and the messaging_sessions
// projector, against a real LMDB store, fed with the steps of a real session machine.

let dir: string;
let store: Store;
t.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sb-session-projection-'));
  store = await openStore({ dataDir: dir });
});
t.teardown(async () => {
  await store.close();
  removeDir(dir);
});

const info: SessionInfo = {
  accountId: 'acc', projectId: 'prj', connectorId: 'con', environment: 'live', variantId: null, streaming: false, platform: 'web',
  userAgent: 'UA', createdAt: Date.UTC(2026, 10, 22), idleMs: 60_000, maxConnections: 5, connectionTtlMs: 90_000, handoffTimeoutMs: 60_000, queueStatusMs: 10_000,
};
const never = <T>() => new Promise<T>(() => undefined);
const machine = sessionMachine.provide({
  actors: {
    startAgent: fromPromise(() => never<AgentReply>()),
    closeConversation: fromPromise(() => never<number>()),
    sleepUntil: fromPromise(() => never<number>()),
    queuePosition: fromPromise(() => never<{ at: number; position: number }>()),
  },
});
const reply = (o: Partial<AgentReply> = {}): AgentReply => ({
  at: info.createdAt + 2000, failure: null, text: 'Hello', suggestions: [], end: false, handoff: null, handoffMode: 'server', queuePosition: 1, agentName: 'Ada', agentAvatarUrl: '', ...o,
});
const client = (kind: string, o: Record<string, unknown> = {}) => ({ type: 'CLIENT', kind, custom: null, clientEventId: null, at: info.createdAt + 1000, ...o });
const done = (id: string, output: unknown) => ({ type: `xstate.done.actor.${id}`, output });
/** A turn's reply: the actor host runs the turn (`ActorKind.effect`) and sends it back as `TURN_DONE`. */
const turnDone = (output: unknown) => ({ type: 'TURN_DONE', output });

/** Runs a session through `events`, one journal entry per step, as the host commits them. */
function steps(id: string, events: unknown[], firstSeq = 1): JournalEntry[] {
  const actor = createActor(machine, { input: { id } });
  let emitted: Array<{ type: string } & Record<string, unknown>> = [];
  actor.on('*', (e) => emitted.push(e as never));
  actor.start();
  return events.map((e, i) => {
    emitted = [];
    actor.send(e as never);
    const s = actor.getSnapshot();
    return {
      seq: firstSeq + i, key: `session/${id}`, kind: 'session', id, shard: 0, version: i + 1, at: info.createdAt + i * 10, value: s.value,
      events: emitted.map(({ type, ...data }) => ({ type, data })),
    };
  });
}

const handoffRun = (id: string) =>
  steps(id, [
    { type: 'CREATE', info },
    client('JOIN'),
    done('start', reply()),
    client('TYPING', { typing: 'TYPING_STATE_STARTED' }),
    client('MESSAGE', { text: 'a person please' }),
    turnDone(reply({ handoff: { destination: 'live_agent', reason: 'asked' }, queuePosition: 2 })),
    done('queueTimer', info.createdAt + 20_000),
    done('queue', { at: info.createdAt + 20_001, position: 1 }),
    { type: 'DESK_ACCEPT', agent: { id: 'k1', name: 'Sam', avatar_url: '' }, at: info.createdAt + 30_000 },
    { type: 'DESK_LEAVE', agentId: 'k1', at: info.createdAt + 40_000 },
  ]);

function kindWith() {
  const transport = createInprocTransport();
  const kind = sessionKind({
    store,
    builder: {} as Builder,
    client: () => Promise.reject(new Error('no conversation in this test')),
    conversationIdleMs: 60_000,
    turnWaitMs: 10_000,
    transport: async () => transport,
  }) as unknown as {
    reply: (s: unknown, e: { type: string }, emitted: JournalEntry['events']) => unknown;
    published: (id: string, entry: JournalEntry) => void;
  };
  return { kind, transport };
}

t.test('the answer comes from what the step emitted; the publication is the rendering of the committed step', async (t) => {
  const { kind, transport } = kindWith();
  const published: Published[] = [];
  transport.subscribe(sessionTopic('s1'), (data) => published.push(decode<Published>(data)));
  const run = steps('s1', [{ type: 'CREATE', info }, client('JOIN'), done('start', reply()), { type: 'CONNECT', connectionId: 'c', gateway: 'g', at: 0 }, client('MESSAGE', { text: 'x', clientEventId: 'm' })]);
  t.same(kind.reply(null, { type: 'CONNECT' }, run[3].events), { ok: true });
  const refused = steps('s0', [{ type: 'CONNECT', connectionId: 'c', gateway: 'g', at: 0 }]);
  t.same(kind.reply(null, { type: 'CONNECT' }, refused[0].events), { ok: false, error: 'not_found' }, 'a session never created');
  for (const e of run) kind.published('s1', e);
  await new Promise((r) => setImmediate(r));
  t.same(published.map((p) => p.map((f) => f.s)), [[1], [2], [3, null, 4], [5, null]], 'one batch per step that has frames; transient ones without sequence');
  const live = published.flat().filter((f) => f.s !== null).map((f) => f.j);
  const replayed = run.flatMap((e) => renderStep('s1', e, true)).map((f) => f.j);
  t.same(replayed, live, 'a replay renders the very frames that went out live');
});

t.test('the records projector folds the journal; applied twice or rebuilt, the record is the same', async (t) => {
  const run = handoffRun('p1');
  const records = sessionRecords(store);
  // Live: entries arrive in small batches, some of them twice (a runner resuming from an older checkpoint).
  await sessionRecordsProjector.apply(run.slice(0, 3), store);
  t.match(await records.get('p1'), { status: 'active', account_id: 'acc', project_id: 'prj', connector_id: 'con', platform: 'web', user_agent: 'UA', handoff: null });
  await sessionRecordsProjector.apply(run.slice(2, 6), store);
  t.match(await records.get('p1'), { status: 'waiting', user_typing: 'TYPING_STATE_STARTED', handoff: { destination: 'live_agent', reason: 'asked', mode: 'server', queue_position: 2, queued_at: String } });
  await sessionRecordsProjector.apply(run.slice(0, 8), store);
  t.equal((await records.get('p1'))?.handoff?.queue_position, 1, 'the new place in the queue');
  await sessionRecordsProjector.apply(run.slice(8, 9), store);
  t.match(await records.get('p1'), { status: 'live', live_agent: { id: 'k1', name: 'Sam' } });
  await sessionRecordsProjector.apply(run.slice(9), store);
  const live = await records.get('p1');
  t.match(live, { status: 'ended', end_reason: 'REASON_NATURAL_END', ended_at: new Date(info.createdAt + 40_000).toISOString(), snapshot_version: 10 });
  await sessionRecordsProjector.apply(run.slice(0, 4), store);
  t.same(await records.get('p1'), live, 'an old entry again changes nothing');
  await sessionRecordsProjector.reset(store);
  t.equal(await records.get('p1'), null, 'reset drops the records');
  await sessionRecordsProjector.apply(run, store);
  t.same(await records.get('p1'), live, 'rebuilt from the journal in one go: equal to the one built live');
});

t.test('the projector skips steps of a session never created, and other kinds', async (t) => {
  const stray = steps('p2', [{ type: 'CONNECT', connectionId: 'c', gateway: 'g', at: 0 }]);
  await sessionRecordsProjector.apply([...stray, { ...handoffRun('p3')[0], kind: 'conversation' }], store);
  t.equal(await sessionRecords(store).get('p2'), null);
  t.equal(await sessionRecords(store).get('p3'), null);
});
