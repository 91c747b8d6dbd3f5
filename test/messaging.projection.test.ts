import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decode } from '../actors/protocol.js';
import { Journal } from '../actors/session/journal.js';
import { sessionKind, sessionTopic, type Published } from '../actors/session/kind.js';
import { sessionRecords } from '../actors/session/record.js';
import { createInprocTransport } from '../actors/transport/inproc.js';
import type { Builder } from '../builder/mod.js';
import type { OutEvent, SessionContext } from '../machines/session.js';
import { openStore, type Store } from '../store/mod.js';
import { removeDir } from './helpers/platform.js';

// The session kind's projection (record, journal, publish) against a real LMDB store, watched through a
// store whose collections note each write when it is issued and when it is durable.

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

type Call = { what: string; durable: boolean };

/** The store as the kind sees it, noting every write of the session's collections. */
function watched(calls: Call[]): Store {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== 'collection') return Reflect.get(target, prop, receiver);
      return (def: { name: string }) => {
        const c = target.collection(def as never) as unknown as Record<string, unknown>;
        return new Proxy(c, {
          get(ct, m, r) {
            const v = Reflect.get(ct, m, r);
            if (typeof v !== 'function' || !['insert', 'update', 'putNewer'].includes(String(m))) return typeof v === 'function' ? v.bind(ct) : v;
            return (...args: unknown[]) => {
              const call = { what: `${def.name}.${String(m)}`, durable: false };
              calls.push(call);
              const p = (v as (...a: unknown[]) => Promise<unknown>).apply(ct, args);
              void p.then(() => (call.durable = true), () => undefined);
              return p;
            };
          },
        });
      };
    },
  });
}

const info = {
  accountId: 'acc',
  projectId: 'prj',
  connectorId: 'con',
  environment: 'live',
  variantId: null,
  streaming: false,
  platform: 'web',
  userAgent: '',
  createdAt: Date.UTC(2026, 10, 22),
  idleMs: 60_000,
  maxConnections: 5,
  connectionTtlMs: 90_000,
  handoffTimeoutMs: 60_000,
  queueStatusMs: 10_000,
};

const event = (n: number, seq: number | null, type: string): OutEvent => ({ n, seq, type, payload: { text: `e${n}` }, at: info.createdAt + n, custom: null });

/** A settled session snapshot as the activation hands it to `project`. */
const snapshot = (outbox: OutEvent[], o: Partial<SessionContext> = {}) => ({
  value: { active: { idle: 'armed', agent: 'ready' } },
  context: { id: 's1', info, outbox, mark: 0, handoff: null, liveAgent: null, userTyping: '', endedAt: null, endReason: null, ...o } as unknown as SessionContext,
});

async function kindWith(calls: Call[]) {
  const transport = createInprocTransport();
  const published: Array<{ events: Published; calls: Call[] }> = [];
  const kind = sessionKind({
    store: watched(calls),
    builder: {} as Builder,
    client: () => Promise.reject(new Error('no conversation in this test')),
    conversationIdleMs: 60_000,
    transport: async () => transport,
  });
  return { kind, transport, published };
}

t.test('the record and the journal appends are issued with the snapshot, and published once both are durable', async (t) => {
  const calls: Call[] = [];
  const { kind, transport, published } = await kindWith(calls);
  transport.subscribe(sessionTopic('s1'), (data) => published.push({ events: decode<Published>(data), calls: calls.map((c) => ({ ...c })) }));
  const pending = kind.project!(snapshot([event(1, 1, 'SESSION_START'), event(2, null, 'SERVICE_AGENT_THINKING')]) as never, 's1', 1);
  // Before any await: both writes are already issued, so they join the commit of the snapshot handed over next.
  t.same(
    calls.map((c) => c.what),
    ['messaging_sessions.putNewer', 'session_journal.insert'],
    'record and journal written in the same tick',
  );
  await pending;
  await new Promise((r) => setImmediate(r));
  t.equal(published.length, 1, 'one publish');
  t.same(published[0].events.map((e) => e.s), [1, null], 'the journaled event and the transient one');
  t.ok(published[0].calls.every((c) => c.durable), 'every write durable before the publish');
  t.equal((await new Journal(store).at('s1', 1))?.sequence, 1);
  t.equal((await sessionRecords(store).get('s1'))?.snapshot_version, 1);
});

t.test('an unchanged record is not written again; new events still ride alone', async (t) => {
  const calls: Call[] = [];
  const { kind } = await kindWith(calls);
  await kind.project!(snapshot([event(1, 1, 'SESSION_START')]) as never, 's2', 1);
  calls.length = 0;
  await kind.project!(snapshot([event(2, 2, 'USER_MESSAGE')], { mark: 1 }) as never, 's2', 2);
  t.same(calls.map((c) => c.what), ['session_journal.insert']);
});

t.test("an older snapshot's record never overwrites a newer one", async (t) => {
  const first = await kindWith([]);
  await first.kind.project!(snapshot([event(1, 1, 'SESSION_START')], { userTyping: 'TYPING_STATE_STARTED' }) as never, 's3', 5);
  // A fresh instance (a stale activation elsewhere) projects an older version with a different view.
  const stale = await kindWith([]);
  await stale.kind.project!(snapshot([event(1, 1, 'SESSION_START')], { userTyping: 'TYPING_STATE_STOPPED' }) as never, 's3', 4);
  const record = await sessionRecords(store).get('s3');
  t.equal(record?.snapshot_version, 5);
  t.equal(record?.user_typing, 'TYPING_STATE_STARTED');
});
