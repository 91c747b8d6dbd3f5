import t from 'tap';
import fc from 'fast-check';
import { createActor, fromPromise } from 'xstate';
import { getShortestPaths } from 'xstate/graph';
import { chunkText, MAX_CHUNKS, sessionMachine, sessionStatus, type AgentReply, type SessionInfo } from '../machines/session.js';

const info: SessionInfo = {
  accountId: 'acc', projectId: 'p', connectorId: 'con', environment: 'live', variantId: null, streaming: false, platform: 'web',
  userAgent: '', createdAt: 1000, idleMs: 600_000, maxConnections: 2, connectionTtlMs: 90_000, handoffTimeoutMs: 60_000, queueStatusMs: 15_000,
};
const reply = (o: Partial<AgentReply> = {}): AgentReply => ({
  at: 2000, failure: null, text: 'Hello there friend', suggestions: [], end: false, handoff: null, handoffMode: 'server', queuePosition: 1, agentName: 'Ada', agentAvatarUrl: '', ...o,
});
const never = <T>() => new Promise<T>(() => undefined);
// Effects never settle on their own here: the tests drive them with their done events.
const machine = sessionMachine.provide({
  actors: {
    startAgent: fromPromise(() => never<AgentReply>()),
    converse: fromPromise(() => never<AgentReply>()),
    closeConversation: fromPromise(() => never<number>()),
    sleepUntil: fromPromise(() => never<number>()),
    queuePosition: fromPromise(() => never<{ at: number; position: number }>()),
  },
});
const client = (kind: string, o: Record<string, unknown> = {}) => ({ type: 'CLIENT', kind, custom: null, clientEventId: null, at: 1500, ...o }) as any;
const done = (id: string, output: unknown) => ({ type: `xstate.done.actor.${id}`, output }) as any;
const handoff = { destination: 'desk', reason: 'asked' };

const start = (i: Partial<SessionInfo> = {}) => {
  const actor = createActor(machine, { input: { id: 's1' } });
  actor.start();
  actor.send({ type: 'CREATE', info: { ...info, ...i } });
  return actor;
};
const types = (actor: ReturnType<typeof start>) => actor.getSnapshot().context.outbox.map((e) => e.type);

t.test('session: every agent state is reachable, and each shortest path replays on a real actor', async (t) => {
  const events = [
    { type: 'CREATE', info },
    client('JOIN'), client('MESSAGE', { text: 'hi' }), client('END'),
    done('start', reply()), done('start', reply({ failure: 'start' })),
    done('turn', reply()), done('turn', reply({ end: true })), done('turn', reply({ failure: 'respond' })),
    done('turn', reply({ handoff })), done('turn', reply({ handoff, handoffMode: 'client' })), done('turn', reply({ handoff, handoffMode: 'unavailable' })),
    done('turn', reply({ handoff, handoffMode: 'invalid' })),
    { type: 'DESK_ACCEPT', agent: { id: 'k1', name: 'Sam', avatar_url: '' }, at: 3000 },
    { type: 'DESK_LEAVE', agentId: 'k1', at: 4000 },
    done('handoffTimer', 70_000), done('idleTimer', 700_000), done('close', 5000),
    done('queueTimer', 17_000), done('queue', { at: 17_000, position: 1 }),
    { type: 'AGENT_PUSH', text: 'Your payment arrived', end: false, at: 3500 },
    { type: 'AGENT_PUSH', text: 'Goodbye', end: true, at: 3600 },
  ] as any[];
  const serializeState = (s: any) => JSON.stringify([s.value, s.context.joinFailed, Math.min(1, s.context.queue.length)]);
  const paths = getShortestPaths(machine, { events, serializeState, input: { id: 's1' } } as any);
  const agentOf = (v: any) => (typeof v === 'string' ? v : typeof v.active.agent === 'string' ? v.active.agent : Object.keys(v.active.agent)[0]);
  const agentStates = new Set(paths.map((p) => agentOf(p.state.value)));
  t.same([...agentStates].sort(), ['absent', 'clientHandoff', 'ended', 'ending', 'handoffFailed', 'joining', 'live', 'new', 'queuedForLive', 'ready', 'responding'].sort());
  for (const path of paths) {
    const actor = createActor(machine, { input: { id: 's1' } });
    actor.start();
    for (const step of path.steps) actor.send(step.event as any);
    t.same(actor.getSnapshot().value, path.state.value, path.steps.map((s: any) => s.event.type.replace('xstate.done.actor.', 'done:') + (s.event.kind ? `:${s.event.kind}` : '')).join(' → ') || '(start)');
    actor.stop();
  }
});

t.test('session: an agent push (an external event\'s function spoke) is an agent message; with end, the session ends', async (t) => {
  const a = start();
  a.send({ type: 'AGENT_PUSH', text: 'early', end: false, at: 1100 } as any);
  t.same(a.getSnapshot().context.reply, { ok: true }, 'taken before the join too');
  a.send(client('JOIN'));
  a.send(done('start', reply({ text: 'Hi!' })));
  a.send({ type: 'AGENT_PUSH', text: 'Your payment arrived', end: false, at: 3500 } as any);
  const last = a.getSnapshot().context.outbox.at(-1)!;
  t.equal(last.type, 'SERVICE_AGENT_MESSAGE');
  t.equal(last.payload.text, 'Your payment arrived');
  t.type(last.seq, 'number', 'journaled');
  t.equal(a.getSnapshot().context.idleDeadline >= 3500 + info.idleMs, true, 'activity moves the idle deadline');
  a.send({ type: 'AGENT_PUSH', text: '', end: true, at: 3600 } as any);
  t.same(types(a).slice(-1), ['SESSION_END'], 'no empty message; the session ends');
  t.equal(a.getSnapshot().value, 'ending');
  a.send({ type: 'AGENT_PUSH', text: 'late', end: false, at: 3700 } as any);
  t.same(a.getSnapshot().context.reply, { ok: false, error: 'not_found' }, 'refused once ending');
  a.stop();
});

t.test('session: journal sequences, transient events and the outbox window', async (t) => {
  const a = start();
  t.same(types(a), ['SESSION_START']);
  t.equal(a.getSnapshot().context.outbox[0].seq, 1);
  a.send(client('JOIN', { custom: { k: 1 } }));
  t.same(types(a), ['SESSION_START', 'REQUEST_SERVICE_AGENT_JOIN'], 'the outbox keeps what followed the previous external event');
  a.send(done('start', reply({ text: 'Hi!' })));
  t.same(types(a), ['SESSION_START', 'REQUEST_SERVICE_AGENT_JOIN', 'SERVICE_AGENT_JOINED', 'SERVICE_AGENT_THINKING', 'SERVICE_AGENT_MESSAGE']);
  t.same(a.getSnapshot().context.outbox.map((e) => e.seq), [1, 2, 3, null, 4], 'thinking has no sequence');
  t.same(a.getSnapshot().context.outbox.slice(1).map((e) => e.custom), [{ k: 1 }, { k: 1 }, { k: 1 }, { k: 1 }], 'the join custom rides on its answers');
  a.send(client('HEARTBEAT'));
  t.same(types(a), ['REQUEST_SERVICE_AGENT_JOIN', 'SERVICE_AGENT_JOINED', 'SERVICE_AGENT_THINKING', 'SERVICE_AGENT_MESSAGE', 'HEARTBEAT'], 'trimmed to events since the join');
  a.send(client('HEARTBEAT'));
  t.same(types(a), ['HEARTBEAT', 'HEARTBEAT']);
  a.stop();
});

t.test('session: user messages queue while the agent answers, each answered in order', async (t) => {
  const a = start();
  a.send(client('JOIN'));
  a.send(client('MESSAGE', { text: 'early', custom: { n: 0 } }));
  t.same(a.getSnapshot().context.queue.map((q) => q.text), ['early'], 'a message during the join waits');
  a.send(done('start', reply()));
  t.equal((a.getSnapshot().value as any).active.agent, 'responding');
  t.equal(a.getSnapshot().context.current?.text, 'early');
  a.send(client('MESSAGE', { text: 'second', custom: { n: 2 } }));
  a.send(done('turn', reply({ text: 'answer one' })));
  t.equal(a.getSnapshot().context.current?.text, 'second', 'the next one is taken at once');
  a.send(done('turn', reply({ text: 'answer two' })));
  const messages = a.getSnapshot().context.outbox.filter((e) => e.type === 'SERVICE_AGENT_MESSAGE');
  t.same(messages.map((e) => [e.payload.text, e.custom]), [['Hello there friend', null], ['answer one', { n: 0 }], ['answer two', { n: 2 }]]);
  t.equal((a.getSnapshot().value as any).active.agent, 'ready');
  a.stop();
});

t.test('session: failures become the contract messages', async (t) => {
  const cases: Array<[Partial<AgentReply>, string]> = [
    [{ failure: 'overload' }, 'Our system is experiencing high load. Please try again in a moment.'],
    [{ failure: 'respond' }, "Sorry, I'm having trouble responding right now. Please try again."],
    [{ failure: 'stream' }, 'Sorry, I encountered an error. Please try again.'],
  ];
  for (const [r, message] of cases) {
    const a = start();
    a.send(client('JOIN'));
    a.send(done('start', reply()));
    a.send(client('MESSAGE', { text: 'x', custom: { c: 1 } }));
    a.send(done('turn', reply(r)));
    const err = a.getSnapshot().context.outbox.at(-1)!;
    t.match(err, { type: 'SYSTEM_MESSAGE', seq: null, payload: { level: 'SYSTEM_MESSAGE_LEVEL_ERROR', message }, custom: { c: 1 } });
    t.equal((a.getSnapshot().value as any).active.agent, 'ready', 'the session carries on');
    a.stop();
  }
  const a = start();
  a.send(client('JOIN'));
  a.send(done('start', reply({ failure: 'start' })));
  t.equal(a.getSnapshot().context.outbox.at(-1)!.payload.message, "Sorry, I'm unable to start a conversation right now. Please try again later.");
  a.send(client('MESSAGE', { text: 'x' }));
  t.same(a.getSnapshot().context.reply, { ok: false, error: 'not_found', message: 'Error: Conversation ID not found in session' }, 'after a failed join');
  a.stop();
  const b = start();
  b.send(client('MESSAGE', { text: 'x' }));
  t.same(b.getSnapshot().context.reply, { ok: false, error: 'not_found', message: 'Error: Conversation not found' }, 'before any join');
  b.stop();
});

t.test('session: client_event_id de-duplication answers with the original sequence', async (t) => {
  const a = start();
  a.send(client('JOIN', { clientEventId: 'j' }));
  a.send(done('start', reply()));
  a.send(client('MESSAGE', { text: 'x', clientEventId: 'm1' }));
  const seq = a.getSnapshot().context.outbox.find((e) => e.type === 'USER_MESSAGE')!.seq;
  a.send(done('turn', reply()));
  const before = a.getSnapshot().context.nextSeq;
  a.send(client('MESSAGE', { text: 'x', clientEventId: 'm1' }));
  t.same(a.getSnapshot().context.reply, { ok: true, duplicateOf: seq });
  t.equal(a.getSnapshot().context.nextSeq, before, 'nothing journaled');
  t.equal((a.getSnapshot().value as any).active.agent, 'ready', 'no second turn');
  a.send(client('JOIN', { clientEventId: 'j' }));
  t.same(a.getSnapshot().context.reply, { ok: true, duplicateOf: 2 });
  a.stop();
});

t.test('session: connections count until closed, or past their TTL once their gateway is not live', async (t) => {
  const a = start({ maxConnections: 2, connectionTtlMs: 1000 });
  const connect = (id: string, gateway: string, at: number, liveGateways?: string[]) => {
    a.send({ type: 'CONNECT', connectionId: id, gateway, at, liveGateways });
    return a.getSnapshot().context.reply;
  };
  t.same(connect('c1', 'g1', 1000, ['g1']), { ok: true });
  t.same(connect('c2', 'g2', 1000, ['g1', 'g2']), { ok: true });
  t.same(connect('c3', 'g1', 1100, ['g1', 'g2']), { ok: false, error: 'limit' }, 'a third is refused');
  a.send({ type: 'DISCONNECT', connectionId: 'c1', at: 1200 });
  t.same(connect('c3', 'g1', 1200, ['g1', 'g2']), { ok: true }, 'a closed one frees its place');
  t.same(connect('c4', 'g1', 2100, ['g1', 'g2']), { ok: false, error: 'limit' }, 'past the TTL, connections of live gateways still count');
  t.same(connect('c4', 'g1', 2100, ['g1']), { ok: true }, "g2 is no longer live: past the TTL its connection c2 no longer counts");
  t.notOk('c2' in a.getSnapshot().context.connections, 'and is forgotten');
  t.same(connect('c5', 'g3', 2150, ['g1']), { ok: false, error: 'limit' }, 'c3 and c4 (gateway g1 live) count');
  a.stop();
  const b = start({ maxConnections: 1, connectionTtlMs: 1000 });
  b.send({ type: 'CONNECT', connectionId: 'n1', gateway: 'new', at: 1000, liveGateways: [] });
  b.send({ type: 'CONNECT', connectionId: 'n2', gateway: 'other', at: 1500, liveGateways: ['other'] });
  t.same(b.getSnapshot().context.reply, { ok: false, error: 'limit' }, "a gateway too new to be listed: its connection counts within the TTL");
  b.stop();
});

t.test('session: idle expiry sleeps again when activity moved the deadline', async (t) => {
  const a = start({ idleMs: 10_000 });
  a.send(client('HEARTBEAT', { at: 5000 }));
  t.equal(a.getSnapshot().context.idleDeadline, 15_000);
  a.send(done('idleTimer', 11_000));
  t.equal(sessionStatus(a.getSnapshot().value), 'active', 'woken at the old deadline: not idle yet');
  a.send(done('idleTimer', 15_000));
  t.equal(a.getSnapshot().value, 'ending');
  t.match(a.getSnapshot().context.outbox.at(-1), { type: 'SESSION_END', payload: { reason: 'REASON_USER_ABANDONED' } });
  a.send(client('HEARTBEAT'));
  t.same(a.getSnapshot().context.reply, { ok: false, error: 'not_found', message: 'Error: Session not found' });
  a.send({ type: 'CONNECT', connectionId: 'c', gateway: 'g', at: 16_000 });
  t.same(a.getSnapshot().context.reply, { ok: false, error: 'not_found' });
  a.stop();
});

t.test('session: while waiting, a changed place in the queue is announced', async (t) => {
  const a = start();
  a.send(client('JOIN'));
  a.send(done('start', reply()));
  a.send(client('MESSAGE', { text: 'person please' }));
  a.send(done('turn', reply({ handoff, queuePosition: 3, at: 2000 })));
  t.equal(a.getSnapshot().context.queueCheckAt, 2000 + 15_000);
  a.send(done('queueTimer', 17_000));
  t.same(a.getSnapshot().value, { active: { idle: 'armed', agent: { queuedForLive: 'checking' } } });
  a.send(done('queue', { at: 17_001, position: 3 }));
  t.equal(a.getSnapshot().context.outbox.filter((e) => e.type === 'HANDOFF_QUEUE_STATUS').length, 1, 'the same place is not repeated');
  a.send(done('queueTimer', 32_001));
  a.send(done('queue', { at: 32_002, position: 1 }));
  const statuses = a.getSnapshot().context.outbox.filter((e) => e.type === 'HANDOFF_QUEUE_STATUS');
  t.same(statuses.map((e) => e.payload), [{ queue_name: 'desk', position_in_queue: 3 }, { queue_name: 'desk', position_in_queue: 1 }]);
  t.equal(a.getSnapshot().context.queueCheckAt, 32_002 + 15_000);
  a.stop();
});

t.test('session: live agents only act on the session they accepted', async (t) => {
  const a = start();
  a.send(client('JOIN'));
  a.send(done('start', reply()));
  a.send(client('MESSAGE', { text: 'person please' }));
  a.send(done('turn', reply({ handoff })));
  t.equal(sessionStatus(a.getSnapshot().value), 'waiting');
  a.send({ type: 'DESK_MESSAGE', agentId: 'k1', text: 'hi', at: 3000 });
  t.same(a.getSnapshot().context.reply, { ok: false, error: 'not_live' });
  a.send({ type: 'DESK_ACCEPT', agent: { id: 'k1', name: 'Sam', avatar_url: '' }, at: 3000 });
  t.equal(sessionStatus(a.getSnapshot().value), 'live');
  a.send({ type: 'DESK_ACCEPT', agent: { id: 'k2', name: 'Kim', avatar_url: '' }, at: 3001 });
  t.same(a.getSnapshot().context.reply, { ok: false, error: 'not_waiting' });
  a.send({ type: 'DESK_MESSAGE', agentId: 'k2', text: 'mine now', at: 3002 });
  t.same(a.getSnapshot().context.reply, { ok: false, error: 'not_agent' });
  a.send({ type: 'DESK_MESSAGE', agentId: 'k1', text: 'hello', at: 3003 });
  t.match(a.getSnapshot().context.outbox.at(-1), { type: 'LIVE_AGENT_MESSAGE', payload: { text: 'hello', agent_id: 'k1' } });
  a.stop();
});

t.test('chunks concatenate to the text, at most MAX_CHUNKS of them', async (t) => {
  fc.assert(
    fc.property(fc.string({ maxLength: 2000 }), (text) => {
      const chunks = chunkText(text);
      return chunks.join('') === text && chunks.length >= 1 && chunks.length <= MAX_CHUNKS;
    }),
  );
  t.same(chunkText('one two three'), ['one ', 'two ', 'three']);
  t.same(chunkText(''), ['']);
});
