import t from 'tap';
import fc from 'fast-check';
import { createActor, fromPromise } from 'xstate';
import { getShortestPaths } from 'xstate/graph';
import { CLOSE_RESUME_MS, converseInput, MAX_CHUNKS, REMEMBERED_CLIENT_EVENTS, SEEN_FOLD, seenSeq, sessionMachine, streamedParts, type AgentReply, type SessionEmitted, type SessionInfo } from '../machines/session.js';
import { chunkText, eventUuid, renderStep, replyOf } from '../actors/session/wire.js';
import { pendingDeadlines } from '../actors/timers.js';

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
    closeConversation: fromPromise(() => never<number>()),
    sleepUntil: fromPromise(() => never<number>()),
    queuePosition: fromPromise(() => never<{ at: number; position: number }>()),
    decideHandoff: fromPromise(() => never<AgentReply>()),
  },
});
const client = (kind: string, o: Record<string, unknown> = {}) => ({ type: 'CLIENT', kind, custom: null, clientEventId: null, at: 1500, ...o }) as any;
const done = (id: string, output: unknown) => ({ type: `xstate.done.actor.${id}`, output }) as any;
/** A turn's reply: the actor host runs the turn (`ActorKind.effect`) and sends it back as `TURN_DONE`. */
const turnDone = (output: unknown) => ({ type: 'TURN_DONE', output }) as any;
const handoff = { destination: 'desk', reason: 'asked' };

/** A started, created session with what it emitted, all of it and that of the last `send`. */
const start = (i: Partial<SessionInfo> = {}) => {
  const actor = createActor(machine, { input: { id: 's1' } });
  const all: SessionEmitted[] = [];
  let last: SessionEmitted[] = [];
  actor.on('*', (e) => {
    all.push(e as SessionEmitted);
    last.push(e as SessionEmitted);
  });
  actor.start();
  const raw = actor.send.bind(actor);
  const send = (e: any) => {
    last = [];
    raw(e);
    return last;
  };
  send({ type: 'CREATE', info: { ...info, ...i } });
  return Object.assign(actor, { all, step: send, get last() { return last; }, reply: () => replyOf(last) });
};
const types = (a: ReturnType<typeof start>) => a.all.map((e) => e.type);
const status = (a: { getSnapshot(): any }) => {
  const s = a.getSnapshot();
  return s.hasTag('ended') ? 'ended' : s.hasTag('waiting') ? 'waiting' : s.hasTag('live') ? 'live' : 'active';
};

t.test('session: every agent state is reachable, and each shortest path replays on a real actor', async (t) => {
  const events = [
    { type: 'CREATE', info },
    client('JOIN'), client('MESSAGE', { text: 'hi' }), client('END'),
    done('start', reply()), done('start', reply({ failure: 'start' })),
    turnDone(reply()), turnDone(reply({ end: true })), turnDone(reply({ failure: 'respond' })), turnDone(reply({ conversationEnded: true })),
    turnDone(reply({ handoff })), turnDone(reply({ handoff, handoffMode: 'client' })), turnDone(reply({ handoff, handoffMode: 'unavailable' })),
    turnDone(reply({ handoff, handoffMode: 'invalid' })),
    { type: 'DESK_ACCEPT', agent: { id: 'k1', name: 'Sam', avatar_url: '' }, at: 3000 },
    { type: 'DESK_LEAVE', agentId: 'k1', at: 4000 },
    done('handoffTimer', 70_000), { type: 'IDLE_TIMEOUT', at: 700_000 }, done('close', 5000),
    done('queueTimer', 17_000), done('queue', { at: 17_000, position: 1 }),
    { type: 'AGENT_PUSH', text: 'Your payment arrived', end: false, at: 3500 },
    { type: 'AGENT_PUSH', text: 'Goodbye', end: true, at: 3600 },
    { type: 'AGENT_PUSH', text: 'Passing you on', end: false, handoff, at: 3700 },
    done('pushedHandoff', reply({ handoff, text: 'Passing you on' })),
  ] as any[];
  const serializeState = (s: any) => JSON.stringify([s.value, s.context.joinFailed, Math.min(1, s.context.queue.length)]);
  const paths = getShortestPaths(machine, { events, serializeState, input: { id: 's1' } } as any);
  const agentOf = (v: any) => (typeof v === 'string' ? v : typeof v.active.agent === 'string' ? v.active.agent : Object.keys(v.active.agent)[0]);
  const agentStates = new Set(paths.map((p) => agentOf(p.state.value)));
  t.same([...agentStates].sort(), ['absent', 'clientHandoff', 'ended', 'ending', 'joining', 'live', 'new', 'pushedHandoff', 'queuedForLive', 'ready', 'responding'].sort());
  for (const path of paths) {
    const actor = createActor(machine, { input: { id: 's1' } });
    actor.start();
    for (const step of path.steps) actor.send(step.event as any);
    t.same(actor.getSnapshot().value, path.state.value, path.steps.map((s: any) => s.event.type.replace('xstate.done.actor.', 'done:') + (s.event.kind ? `:${s.event.kind}` : '')).join(' → ') || '(start)');
    actor.stop();
  }
});

const seqs = (es: SessionEmitted[]) => es.map((e) => ('seq' in e ? e.seq : null));

t.test("session: a handoff an external event's function made is decided and announced as a turn's", async (t) => {
  const a = start();
  a.step(client('JOIN'));
  a.step(done('start', reply({ text: 'Hi!' })));
  a.step({ type: 'AGENT_PUSH', text: 'Passing you on', end: false, handoff, at: 3500 } as any);
  t.same(a.getSnapshot().value, { active: { agent: 'pushedHandoff' } }, 'how it goes is decided first');
  t.match(a.getSnapshot().children.pushedHandoff?.getSnapshot().input, { text: 'Passing you on', handoff, at: 3500 });
  const out = a.step(done('pushedHandoff', reply({ handoff, text: 'Passing you on', queuePosition: 2, at: 3600 })));
  t.same(out.map((e) => e.type), ['session.agent_message', 'session.handoff_triggered', 'session.agent_left', 'session.handoff_accepted', 'session.queue_status']);
  t.match(out[0], { text: 'Passing you on' });
  t.same(a.getSnapshot().value, { active: { agent: { queuedForLive: 'waiting' } } });
  // Already handed off: a second push with a handoff is only words.
  t.same(a.step({ type: 'AGENT_PUSH', text: 'Still here', end: false, handoff, at: 3700 } as any).map((e) => e.type), ['session.agent_message']);
  // Said nothing: no empty message.
  const b = start();
  b.step(client('JOIN'));
  b.step(done('start', reply({ text: 'Hi!' })));
  b.step({ type: 'AGENT_PUSH', text: '', end: false, handoff, at: 3500 } as any);
  t.same(b.step(done('pushedHandoff', reply({ handoff, text: '', handoffMode: 'client', at: 3600 }))).map((e) => e.type), ['session.handoff_triggered', 'session.client_handoff_required', 'session.agent_left']);
  a.stop();
  b.stop();
});

t.test('session: an agent push (an external event\'s function spoke) is an agent message; with end, the session ends', async (t) => {
  const a = start();
  a.step({ type: 'AGENT_PUSH', text: 'early', end: false, at: 1100 });
  t.same(a.reply(), { ok: true }, 'taken before the join too');
  a.step(client('JOIN'));
  a.step(done('start', reply({ text: 'Hi!' })));
  const pushed = a.step({ type: 'AGENT_PUSH', text: 'Your payment arrived', end: false, at: 3500 });
  t.match(pushed, [{ type: 'session.agent_message', text: 'Your payment arrived', seq: Number, account_id: 'acc', project_id: 'p' }], 'journaled');
  t.equal(a.getSnapshot().context.idleDeadline >= 3500 + info.idleMs, true, 'activity moves the idle deadline');
  t.same(a.step({ type: 'AGENT_PUSH', text: '', end: true, at: 3600 }).map((e) => e.type), ['session.ended'], 'no empty message; the session ends');
  t.equal(a.getSnapshot().value, 'ending');
  a.step({ type: 'AGENT_PUSH', text: 'late', end: false, at: 3700 });
  t.same(a.reply(), { ok: false, error: 'not_found' }, 'refused once ending');
  a.stop();
});

t.test('session: sequences of journaled events, none on transient ones; the context holds no events', async (t) => {
  const a = start();
  t.same(types(a), ['session.started']);
  t.same(seqs(a.all), [1]);
  a.step(client('JOIN', { custom: { k: 1 } }));
  a.step(done('start', reply({ text: 'Hi!' })));
  t.same(types(a), ['session.started', 'session.join_requested', 'session.agent_joined', 'session.thinking', 'session.agent_message']);
  t.same(seqs(a.all), [1, 2, 3, null, 4], 'thinking has no sequence');
  t.same(a.all.slice(1).map((e) => (e as any).custom), [{ k: 1 }, { k: 1 }, { k: 1 }, { k: 1 }], 'the join custom rides on its answers');
  t.same(seqs(a.step(client('HEARTBEAT'))), [5]);
  t.same(seqs(a.step(client('TYPING', { typing: 'TYPING_STATE_STARTED' }))), [null], 'typing is transient');
  const keys = Object.keys(a.getSnapshot().context).sort();
  for (const k of ['outbox', 'mark', 'reply', 'n']) t.notOk(keys.includes(k), `no ${k} in the context`);
  a.stop();
});

t.test('session: a streamed reply takes one position per part; the wire module renders the parts', async (t) => {
  const a = start({ streaming: true });
  a.step(client('JOIN'));
  const text = 'one two three four five';
  const out = a.step(done('start', reply({ text, suggestions: ['ok'] })));
  const msg = out.find((e) => e.type === 'session.agent_message') as any;
  t.match(msg, { seq: 4, parts: 5, streamed: true, text });
  t.equal(a.getSnapshot().context.nextSeq, 9, 'five positions reserved');
  const frames = renderStep('s1', { version: 3, at: 2000, events: out.map(({ type, ...data }) => ({ type, data })) }).map((f) => JSON.parse(f.j));
  const chunks = frames.filter((f) => f.type === 'EVENT_TYPE_SERVICE_AGENT_MESSAGE_CHUNK');
  t.same(chunks.map((c) => c.sequence), [4, 5, 6, 7, 8]);
  t.equal(chunks.map((c) => c.payload.text).join(''), text);
  t.same(chunks.at(-1).payload.response_suggestions, [{ message_text: 'ok' }], 'suggestions on the last chunk');
  t.same(new Set(chunks.map((c) => c.payload.message_id)).size, 1, 'one message');
  a.stop();
});

t.test('session: user messages queue while the agent answers, each answered in order', async (t) => {
  const a = start();
  a.step(client('JOIN'));
  a.step(client('MESSAGE', { text: 'early', custom: { n: 0 } }));
  t.same(a.getSnapshot().context.queue.map((q) => q.text), ['early'], 'a message during the join waits');
  a.step(done('start', reply()));
  t.equal((a.getSnapshot().value as any).active.agent, 'responding');
  t.equal(a.getSnapshot().context.current?.text, 'early');
  t.ok(a.getSnapshot().hasTag('turn'), 'responding asks the host for the turn effect');
  t.match(converseInput(a.getSnapshot().context), { text: 'early', info: { projectId: 'p' } }, 'with the message taken');
  a.step(client('MESSAGE', { text: 'second', custom: { n: 2 } }));
  a.step(turnDone(reply({ text: 'answer one' })));
  t.equal(a.getSnapshot().context.current?.text, 'second', 'the next one is taken at once');
  a.step(turnDone(reply({ text: 'answer two' })));
  const messages = a.all.filter((e) => e.type === 'session.agent_message') as any[];
  t.same(messages.map((e) => [e.text, e.custom]), [['Hello there friend', null], ['answer one', { n: 0 }], ['answer two', { n: 2 }]]);
  t.equal((a.getSnapshot().value as any).active.agent, 'ready');
  a.stop();
});

t.test('session: a user message to a ready agent and its reply are one microstep each (no step through `answered`)', async (t) => {
  const inspected: Array<{ type: string }> = [];
  const actor = createActor(machine, { input: { id: 's1' }, inspect: (e) => void inspected.push(e as any) });
  const all: SessionEmitted[] = [];
  actor.on('*', (e) => void all.push(e as SessionEmitted));
  actor.start();
  actor.send({ type: 'CREATE', info });
  actor.send(client('JOIN'));
  actor.send(done('start', reply()));
  t.equal((actor.getSnapshot().value as any).active.agent, 'ready');
  const counted = (send: () => void) => {
    inspected.length = 0;
    send();
    return inspected.filter((e) => e.type === '@xstate.microstep').length;
  };
  const from = all.length;
  t.equal(counted(() => actor.send(client('MESSAGE', { text: 'hi', custom: { n: 1 } }))), 1, 'the message');
  t.equal((actor.getSnapshot().value as any).active.agent, 'responding');
  t.equal(actor.getSnapshot().context.current?.text, 'hi', 'taken at once');
  t.same(actor.getSnapshot().context.queue, [], 'not through the queue');
  t.equal(counted(() => actor.send(turnDone(reply({ text: 'hello' })))), 1, 'the reply, straight to ready');
  t.equal((actor.getSnapshot().value as any).active.agent, 'ready');
  t.same(all.slice(from).map((e) => e.type), ['session.user_message', 'session.thinking', 'session.agent_message'], 'the same events as through the queue');
  actor.stop();
});

t.test('session: a message that finds its conversation ended (expired under a session kept alive by heartbeats) ends the session, abandoned, with no apology', async (t) => {
  const a = start();
  a.step(client('JOIN'));
  a.step(done('start', reply()));
  a.step(client('MESSAGE', { text: 'still there?', custom: { c: 2 } }));
  const out = a.step(turnDone(reply({ conversationEnded: true, at: 9000 })));
  t.notOk(out.some((e) => e.type === 'session.failure'), 'no apology');
  t.notOk(out.some((e) => e.type === 'session.agent_message'), 'no answer');
  t.match(out.find((e) => e.type === 'session.ended'), { reason: 'REASON_USER_ABANDONED', custom: { c: 2 } }, 'the end answers the message');
  t.not(status(a), 'active', 'the session is over');
  a.stop();
});

t.test('session: failures are semantic; the wire module says the contract messages', async (t) => {
  const cases: Array<[Partial<AgentReply>, string]> = [
    [{ failure: 'overload' }, 'Our system is experiencing high load. Please try again in a moment.'],
    [{ failure: 'respond' }, "Sorry, I'm having trouble responding right now. Please try again."],
    [{ failure: 'stream' }, 'Sorry, I encountered an error. Please try again.'],
  ];
  for (const [r, message] of cases) {
    const a = start();
    a.step(client('JOIN'));
    a.step(done('start', reply()));
    a.step(client('MESSAGE', { text: 'x', custom: { c: 1 } }));
    const out = a.step(turnDone(reply(r)));
    t.match(out.at(-1), { type: 'session.failure', reason: r.failure, custom: { c: 1 } });
    t.notOk('seq' in out.at(-1)!, 'transient');
    const [frame] = renderStep('s1', { version: 9, at: 2000, events: out.map(({ type, ...data }) => ({ type, data })) }).map((f) => JSON.parse(f.j));
    t.match(frame, { type: 'EVENT_TYPE_SYSTEM_MESSAGE', sequence: null, payload: { level: 'SYSTEM_MESSAGE_LEVEL_ERROR', message }, metadata: { custom: { c: 1 } } });
    t.equal((a.getSnapshot().value as any).active.agent, 'ready', 'the session carries on');
    a.stop();
  }
  const a = start();
  a.step(client('JOIN'));
  t.match(a.step(done('start', reply({ failure: 'start' }))).at(-1), { type: 'session.failure', reason: 'start' });
  a.step(client('MESSAGE', { text: 'x' }));
  t.same(a.reply(), { ok: false, error: 'not_found', message: 'Error: Conversation ID not found in session' }, 'after a failed join');
  a.stop();
  const b = start();
  b.step(client('MESSAGE', { text: 'x' }));
  t.same(b.reply(), { ok: false, error: 'not_found', message: 'Error: Conversation not found' }, 'before any join');
  b.stop();
});

t.test('session: client_event_id de-duplication answers with the original sequence', async (t) => {
  const a = start();
  a.step(client('JOIN', { clientEventId: 'j' }));
  a.step(done('start', reply()));
  const seq = (a.step(client('MESSAGE', { text: 'x', clientEventId: 'm1' })).find((e) => e.type === 'session.user_message') as any).seq;
  a.step(turnDone(reply()));
  const before = a.getSnapshot().context.nextSeq;
  a.step(client('MESSAGE', { text: 'x', clientEventId: 'm1' }));
  t.same(a.reply(), { ok: true, duplicateOf: seq });
  t.equal(a.getSnapshot().context.nextSeq, before, 'nothing journaled');
  t.equal((a.getSnapshot().value as any).active.agent, 'ready', 'no second turn');
  a.step(client('JOIN', { clientEventId: 'j' }));
  t.same(a.reply(), { ok: true, duplicateOf: 2 });
  a.stop();
});

t.test('session: the remembered client_event_ids are the last 100 at least, each with the sequence of its echo, at a fixed width', async (t) => {
  const a = start();
  a.step(client('JOIN', { clientEventId: 'j' }));
  a.step(done('start', reply()));
  const seqOf = new Map<string, number>();
  // Ids of every length a client may send (up to 256 characters), some alike but for one character. With the
  // join's, seven folds and the newest but one apart.
  const ids = Array.from({ length: REMEMBERED_CLIENT_EVENTS + 3 * SEEN_FOLD - 2 }, (_, i) => (i % 3 === 0 ? `m${i}` : `${'x'.repeat(Math.min(i * 2, 250))}-${i}`).slice(0, 256));
  for (const id of ids) {
    const emitted = a.step(client('MESSAGE', { text: 'x', clientEventId: id }));
    seqOf.set(id, (emitted.find((e) => e.type === 'session.user_message') as any).seq);
    a.step(turnDone(reply()));
  }
  const seen = a.getSnapshot().context.seen;
  t.equal(seen.seqs.length, REMEMBERED_CLIENT_EVENTS, 'the folded ones: the last 100 at the last fold');
  t.equal(seen.newSeqs.length, SEEN_FOLD - 1, 'the newest apart');
  t.equal(seen.ids.length, seen.seqs.length * 14, 'fixed width whatever the ids');
  t.equal(seen.newIds.length, seen.newSeqs.length * 14, 'fixed width whatever the ids');
  const kept = REMEMBERED_CLIENT_EVENTS + SEEN_FOLD - 1;
  for (const id of ids.slice(-kept)) t.equal(seenSeq(seen, id), seqOf.get(id));
  for (const id of [...ids.slice(0, ids.length - kept), 'j', 'never-sent']) t.equal(seenSeq(seen, id), undefined, `${id.slice(0, 12)} is not remembered`);
  const last = ids.at(-1)!;
  a.step(client('MESSAGE', { text: 'x', clientEventId: last }));
  t.same(a.reply(), { ok: true, duplicateOf: seqOf.get(last) });
  const first = ids[0];
  t.ok(a.step(client('MESSAGE', { text: 'x', clientEventId: first })).some((e) => e.type === 'session.user_message'), 'an id forgotten long ago is a new message');
  a.stop();
});

t.test('session: a message copies only the newest remembered ids and shares the rest with the step before, until they are folded', async (t) => {
  const a = start();
  a.step(client('JOIN', { clientEventId: 'j' }));
  a.step(done('start', reply()));
  let folds = 0;
  for (let i = 0; i < 3 * SEEN_FOLD; i++) {
    const before = a.getSnapshot().context.seen;
    a.step(client('MESSAGE', { text: 'x', clientEventId: `m${i}` }));
    const after = a.getSnapshot().context.seen;
    if (after.newSeqs.length === 0) {
      folds++;
      t.equal(after.seqs.length, Math.min(REMEMBERED_CLIENT_EVENTS, before.seqs.length + SEEN_FOLD), 'a fold takes in the newest');
    } else {
      t.equal(after.seqs, before.seqs, 'the folded sequences are the same array');
      t.equal(after.ids, before.ids, 'and the same string');
    }
    a.step(turnDone(reply()));
    t.equal(a.getSnapshot().context.seen, after, 'a step that remembers no id keeps them as they are');
  }
  t.equal(folds, 3, `folded every ${SEEN_FOLD} ids`);
  a.stop();
});

t.test('session: seenSeq finds exactly the remembered ids (property)', async () => {
  fc.assert(
    // An empty id is no id: never remembered (as before). Up to 150 ids: past a fold, past the 100 kept.
    fc.property(fc.uniqueArray(fc.string({ minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 150 }), fc.string({ maxLength: 40 }), (ids, other) => {
      const a = start();
      a.step(client('JOIN', { clientEventId: null }));
      a.step(done('start', reply()));
      const seqs: number[] = [];
      for (const id of ids) {
        seqs.push((a.step(client('MESSAGE', { text: 'x', clientEventId: id })).find((e) => e.type === 'session.user_message') as any).seq);
        a.step(turnDone(reply()));
      }
      const seen = a.getSnapshot().context.seen;
      a.stop();
      const remembered = seen.seqs.length + seen.newSeqs.length;
      const from = ids.length - remembered;
      return (
        remembered >= Math.min(ids.length, REMEMBERED_CLIENT_EVENTS) &&
        remembered < REMEMBERED_CLIENT_EVENTS + SEEN_FOLD &&
        ids.every((id, i) => seenSeq(seen, id) === (i >= from ? seqs[i] : undefined)) &&
        (ids.includes(other) || seenSeq(seen, other) === undefined)
      );
    }),
    { numRuns: 200 },
  );
});

t.test('session: connections count until closed, or past their TTL once their gateway is not live', async (t) => {
  const a = start({ maxConnections: 2, connectionTtlMs: 1000 });
  const connect = (id: string, gateway: string, at: number, liveGateways?: string[]) => {
    a.step({ type: 'CONNECT', connectionId: id, gateway, at, liveGateways });
    return a.reply();
  };
  t.same(connect('c1', 'g1', 1000, ['g1']), { ok: true });
  t.same(connect('c2', 'g2', 1000, ['g1', 'g2']), { ok: true });
  t.same(connect('c3', 'g1', 1100, ['g1', 'g2']), { ok: false, error: 'limit' }, 'a third is refused');
  a.step({ type: 'DISCONNECT', connectionId: 'c1', at: 1200 });
  t.same(connect('c3', 'g1', 1200, ['g1', 'g2']), { ok: true }, 'a closed one frees its place');
  t.same(connect('c4', 'g1', 2100, ['g1', 'g2']), { ok: false, error: 'limit' }, 'past the TTL, connections of live gateways still count');
  t.same(connect('c4', 'g1', 2100, ['g1']), { ok: true }, "g2 is no longer live: past the TTL its connection c2 no longer counts");
  t.notOk(a.getSnapshot().context.connections.some((c) => c.id === 'c2'), 'and is forgotten');
  t.same(connect('c5', 'g3', 2150, ['g1']), { ok: false, error: 'limit' }, 'c3 and c4 (gateway g1 live) count');
  a.stop();
  const b = start({ maxConnections: 1, connectionTtlMs: 1000 });
  b.step({ type: 'CONNECT', connectionId: 'n1', gateway: 'new', at: 1000, liveGateways: [] });
  b.step({ type: 'CONNECT', connectionId: 'n2', gateway: 'other', at: 1500, liveGateways: ['other'] });
  t.same(b.reply(), { ok: false, error: 'limit' }, "a gateway too new to be listed: its connection counts within the TTL");
  b.stop();
});

t.test('session: idle expiry is a deadline the host keeps: an active session asks for it, and a timeout before a moved deadline changes nothing', async (t) => {
  const a = start({ idleMs: 10_000 });
  t.ok(a.getSnapshot().hasTag('expires'), 'active: tagged expires, so the host keeps its idleDeadline');
  t.same(a.getSnapshot().children, {}, 'no child timer');
  a.step(client('HEARTBEAT', { at: 5000 }));
  t.equal(a.getSnapshot().context.idleDeadline, 15_000);
  a.step({ type: 'IDLE_TIMEOUT', at: 11_000 });
  t.equal(status(a), 'active', 'woken at the old deadline: not idle yet');
  t.match(a.step({ type: 'IDLE_TIMEOUT', at: 15_000 }).at(-1), { type: 'session.ended', reason: 'REASON_USER_ABANDONED', at: 15_000 });
  t.notOk(a.getSnapshot().hasTag('expires'), 'ending: no idle deadline');
  t.equal(a.getSnapshot().value, 'ending');
  t.equal(status(a), 'ended', 'tagged ended');
  t.same(pendingDeadlines(a.getPersistedSnapshot()), [{ id: 'closeWake', until: 15_000 + CLOSE_RESUME_MS }], 'while the close runs, a durable timer wakes the session should its owner die');
  a.step(client('HEARTBEAT'));
  t.same(a.reply(), { ok: false, error: 'not_found', message: 'Error: Session not found' });
  a.step({ type: 'CONNECT', connectionId: 'c', gateway: 'g', at: 16_000 });
  t.same(a.reply(), { ok: false, error: 'not_found' });
  a.step({ type: 'xstate.done.actor.closeWake', output: 20_000 });
  t.equal(a.getSnapshot().value, 'ending', "the wake's firing changes nothing");
  a.step(done('close', 1));
  t.equal(a.getSnapshot().value, 'ended');
  t.same(pendingDeadlines(a.getPersistedSnapshot()), [], 'closed: nothing to wake');
  a.stop();
});

t.test("session: the events that answer a user message echo its custom, a handoff's and an end's included (contract 2.9)", async (t) => {
  const cases: Array<[string, Record<string, unknown>, string[]]> = [
    ['server handoff', { handoff }, ['session.agent_message', 'session.handoff_triggered', 'session.agent_left', 'session.handoff_accepted', 'session.queue_status']],
    ['client handoff', { handoff, handoffMode: 'client' }, ['session.agent_message', 'session.handoff_triggered', 'session.client_handoff_required', 'session.agent_left']],
    ['failed handoff', { handoff, handoffMode: 'unavailable' }, ['session.agent_message', 'session.handoff_triggered', 'session.handoff_failed', 'session.failure', 'session.ended']],
    ['invalid handoff', { handoff, handoffMode: 'invalid' }, ['session.agent_message', 'session.handoff_triggered', 'session.handoff_failed', 'session.failure', 'session.ended']],
    ['the agent ends', { end: true }, ['session.agent_message', 'session.ended']],
  ];
  for (const [what, o, types] of cases) {
    const a = start();
    a.step(client('JOIN'));
    a.step(done('start', reply()));
    a.step(client('MESSAGE', { text: 'person please', custom: { ref: what } }));
    const out = a.step(turnDone(reply(o)));
    t.same(out.map((e) => e.type), types, what);
    for (const e of out) t.same((e as { custom?: unknown }).custom, { ref: what }, `${what}: ${e.type}`);
    t.equal(a.getSnapshot().context.current, null, `${what}: the message is answered`);
    a.stop();
  }
});

t.test('session: while waiting, a changed place in the queue is announced', async (t) => {
  const a = start();
  a.step(client('JOIN'));
  a.step(done('start', reply()));
  a.step(client('MESSAGE', { text: 'person please' }));
  const out = a.step(turnDone(reply({ handoff, queuePosition: 3, at: 2000 })));
  t.same(out.map((e) => e.type), ['session.agent_message', 'session.handoff_triggered', 'session.agent_left', 'session.handoff_accepted', 'session.queue_status']);
  t.match(out[1], { destination: 'desk', reason: 'asked', mode: 'server', at: 2000 });
  t.equal(a.getSnapshot().context.queueCheckAt, 2000 + 15_000);
  a.step(done('queueTimer', 17_000));
  t.same(a.getSnapshot().value, { active: { agent: { queuedForLive: 'checking' } } });
  t.same(a.step(done('queue', { at: 17_001, position: 3 })), [], 'the same place is not repeated');
  a.step(done('queueTimer', 32_001));
  t.match(a.step(done('queue', { at: 32_002, position: 1 })), [{ type: 'session.queue_status', destination: 'desk', position: 1 }]);
  t.equal(a.getSnapshot().context.queueCheckAt, 32_002 + 15_000);
  a.stop();
});

t.test('session: live agents only act on the session they accepted', async (t) => {
  const a = start();
  a.step(client('JOIN'));
  a.step(done('start', reply()));
  a.step(client('MESSAGE', { text: 'person please' }));
  a.step(turnDone(reply({ handoff })));
  t.equal(status(a), 'waiting');
  a.step({ type: 'DESK_MESSAGE', agentId: 'k1', text: 'hi', at: 3000 });
  t.same(a.reply(), { ok: false, error: 'not_live' });
  a.step({ type: 'DESK_ACCEPT', agent: { id: 'k1', name: 'Sam', avatar_url: '' }, at: 3000 });
  t.equal(status(a), 'live');
  a.step({ type: 'DESK_ACCEPT', agent: { id: 'k2', name: 'Kim', avatar_url: '' }, at: 3001 });
  t.same(a.reply(), { ok: false, error: 'not_waiting' });
  a.step({ type: 'DESK_MESSAGE', agentId: 'k2', text: 'mine now', at: 3002 });
  t.same(a.reply(), { ok: false, error: 'not_agent' });
  t.match(a.step({ type: 'DESK_MESSAGE', agentId: 'k1', text: 'hello', at: 3003 }), [{ type: 'session.live_agent_message', text: 'hello', agent_id: 'k1', seq: Number }]);
  a.stop();
});

t.test('chunks concatenate to the text, as many as the positions the machine reserves, at most MAX_CHUNKS', async (t) => {
  fc.assert(
    fc.property(fc.string({ maxLength: 2000 }), (text) => {
      const chunks = chunkText(text);
      return chunks.join('') === text && chunks.length === streamedParts(text) && chunks.length >= 1 && chunks.length <= MAX_CHUNKS;
    }),
  );
  t.same(chunkText('one two three'), ['one ', 'two ', 'three']);
  t.same(chunkText(''), ['']);
});

t.test('a frame id is a name-based UUID of the session and the place: the same in every build, so clients de-duplicate across upgrades', async (t) => {
  // SHA-1 of `ses_x:s1`, version 5, RFC 4122 variant: pinned, as ids already sent must not change.
  t.equal(eventUuid('ses_x', 's1'), '80f744b7-6620-5782-9725-3b52b000c8e5');
  fc.assert(
    fc.property(fc.string(), fc.string(), (session, place) => {
      const id = eventUuid(session, place);
      return /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id) && id === eventUuid(session, place);
    }),
  );
});
