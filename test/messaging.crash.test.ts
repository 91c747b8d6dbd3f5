import t, { type Test } from 'tap';
import net from 'node:net';
import { startCluster } from './helpers/cluster.js';
import { connect, is, T, messagingProject, type Ev } from './helpers/messaging.js';
import { natsAvailable } from './helpers/nats.js';
import { startLlmStandin } from './helpers/llm-standin.js';

// Without nats-server this skips locally; with CI=true natsAvailable() throws, so it fails instead.
const needsNats = () => (natsAvailable() ? {} : { skip: 'nats-server is not installed' });

const MARKER = 'This message crashes the worker after its commit';

t.test('a worker killed between a step\'s commit and its publication loses no event: the open socket is caught up from the journal, the replay has it', needsNats(), async (t) => {
  // Every worker dies (SIGKILL, from inside) right after committing a step that holds the marker message, before
  // publishing it: the step is never published.
  const cluster = await startCluster({ workers: 2, sockets: 1, leaseTtlMs: 1500, env: { SESSION_FAULT_KILL_BEFORE_PUBLISH: MARKER }, socketEnv: { ASK_TIMEOUT_MS: '15000' } });
  t.teardown(() => cluster.stop());
  const [gateway] = cluster.sockets.map((s) => s.socket);
  const m = await messagingProject(cluster.edge);
  const { sessionId, accessToken } = await m.session({}, gateway);
  const c = await connect(gateway, { session_id: sessionId, access_token: accessToken });
  await c.waitFor(is('EVENT_BATCH'));
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  const owner = (await cluster.ownerOf('session', sessionId))!;
  const before = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: MARKER }, { client_event_id: 'crash-1' });
  // The owner dies; the gateway's ask is retried on the other worker, which answers it from the actor's
  // snapshot (the event was applied) and runs the turn the snapshot was waiting for.
  const reply = await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'the reply, from the surviving worker', before);
  const exited = owner.child.exitCode !== null || owner.child.signalCode !== null ? owner.child.signalCode : await new Promise((r) => owner.child.once('exit', (_code, signal) => r(signal)));
  t.equal(exited, 'SIGKILL', 'the owner was killed after the commit');
  const live = c.flat();
  // The echo was never published; the reply's sequence came past it, and the gateway read what the socket was
  // owed from the journal first.
  const echoSeq = reply.sequence! - 1;
  const echoed = live.slice(before).findIndex((e) => is('USER_MESSAGE')(e) && e.payload.text === MARKER);
  t.ok(echoed >= 0, 'the socket got the echo all the same: caught up from the journal');
  t.match(live.slice(before)[echoed], { sequence: echoSeq }, 'with its sequence');
  t.ok(echoed < live.slice(before).indexOf(reply), 'before the reply');

  // A reconnect from before the crash replays the step nobody saw.
  const again = await connect(gateway, { session_id: sessionId, access_token: accessToken, cursor: String(echoSeq - 1) });
  const replay: Ev[] = (await again.waitFor(is('EVENT_BATCH'))).payload.events;
  t.match(replay[0], { type: T('USER_MESSAGE'), sequence: echoSeq, payload: { text: MARKER }, metadata: { custom: { client_event_id: 'crash-1' } } }, 'the committed, unpublished echo is replayed');

  // The whole replay is the journaled events that went out live, frame for frame, plus the lost one.
  const all = await connect(gateway, { session_id: sessionId, access_token: accessToken });
  const history: Ev[] = (await all.waitFor(is('EVENT_BATCH'))).payload.events;
  const seen = live.filter((e) => e.sequence !== null);
  t.same(history, seen, 'journal replay equals the live events');
  t.same(history.map((e) => e.sequence), history.map((_, i) => i + 1), 'no sequence missing');
  for (const x of [c, again, all]) await x.close();
});

t.test('a worker killed between the commit of a session\'s end and its publication: every open socket still gets the end, and closes', needsNats(), async (t) => {
  // The owner dies right after committing the step of the end whose client_event_id is this, before publishing
  // it. Nothing is ever journaled after an end, so no later event would show the sockets what they missed.
  const END_ID = 'the end that crashes';
  const cluster = await startCluster({ workers: 2, sockets: 2, leaseTtlMs: 1500, env: { SESSION_FAULT_KILL_BEFORE_PUBLISH: END_ID }, socketEnv: { ASK_TIMEOUT_MS: '15000' } });
  t.teardown(() => cluster.stop());
  const [one, two] = cluster.sockets.map((s) => s.socket);
  const m = await messagingProject(cluster.edge);
  const { sessionId, accessToken } = await m.session({}, one);
  const q = { session_id: sessionId, access_token: accessToken };
  // The socket that ends the session, another on its gateway, and one on the other gateway.
  const [asker, beside, elsewhere] = [await connect(one, q), await connect(one, q), await connect(two, q)];
  t.teardown(() => Promise.all([asker, beside, elsewhere].map((c) => c.close())));
  asker.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  for (const c of [asker, beside, elsewhere]) await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  const owner = (await cluster.ownerOf('session', sessionId))!;
  asker.send(T('USER_END_SESSION'), {}, { client_event_id: END_ID });
  const exited = owner.child.exitCode !== null || owner.child.signalCode !== null ? owner.child.signalCode : await new Promise((r) => owner.child.once('exit', (_code, signal) => r(signal)));
  t.equal(exited, 'SIGKILL', 'the owner was killed after the commit');

  // The gateway's ask was retried on the other worker (answered from the snapshot): it caught its sockets of the
  // session up from the journal, the asker's and the other one's.
  for (const [name, c] of [['the asker', asker], ['the other socket on its gateway', beside]] as const) {
    const end = await c.waitFor(is('SESSION_END'), `${name}: SESSION_END, caught up from the journal`);
    t.match(end, { payload: { reason: 'REASON_USER_END' }, metadata: { custom: { client_event_id: END_ID } } }, `${name}: the end`);
    t.ok(c.flat().some((e) => is('USER_END_SESSION')(e) && e.sequence === end.sequence! - 1), `${name}: and the echo before it`);
    t.equal((await c.closed).code, 1000, `${name}: closed as after any end`);
  }

  // The other gateway asked nothing: its socket hears of the end at its next frame, refused as the session is over,
  // and is caught up before that refusal.
  const from = elsewhere.flat().length;
  elsewhere.send(T('HEARTBEAT'), {}, { client_event_id: 'still here' });
  const next = await elsewhere.waitFor((e) => is('SESSION_END')(e) || is('SYSTEM_MESSAGE')(e), 'the answer to the heartbeat', from);
  t.match(next, { type: T('SESSION_END'), payload: { reason: 'REASON_USER_END' } }, 'the other gateway\'s socket gets SESSION_END before the refusal');
  t.equal((await elsewhere.closed).code, 1000, 'and closes');
});

/** A model stand-in that greets at once and takes `delayMs` over a message that says "slowly". */
async function slowModel(t: Test, delayMs: number) {
  const llm = await startLlmStandin((body) => {
    const users = (body.messages as Array<{ role: string; content: string }>).filter((x) => x.role === 'user');
    const last = users[users.length - 1]?.content ?? '';
    return users.length === 0 ? { text: 'Hello from the model!' } : { text: `You said: ${last}`, delayMs: /slowly/.test(last) ? delayMs : 0 };
  });
  t.teardown(() => llm.close());
  return llm;
}

/** A session on the cluster's socket gateway, greeted, whose visitor has sent "answer me slowly" and seen its echo. */
async function slowTurn(t: Test, cluster: Awaited<ReturnType<typeof startCluster>>) {
  const [gateway] = cluster.sockets.map((s) => s.socket);
  const m = await messagingProject(cluster.edge);
  const { sessionId, accessToken } = await m.session({}, gateway);
  const c = await connect(gateway, { session_id: sessionId, access_token: accessToken });
  t.teardown(() => c.close());
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'answer me slowly' });
  await c.waitFor((e) => is('USER_MESSAGE')(e) && e.payload.text === 'answer me slowly', 'the echo', from);
  return { sessionId, c, from };
}

t.test('a worker killed while a message\'s reply is being made: the new owner takes the turn up by itself, with nothing more sent', needsNats(), async (t) => {
  // The model takes 4 s over a message that says "slowly": long enough to kill the session's owner in the middle.
  // The socket gateway's ask was answered with the echo already, so no asker retries: the session's reply goes
  // to sockets only, and without a wake-up of its own it waited for the visitor's next message.
  const llm = await slowModel(t, 4000);
  const cluster = await startCluster({ workers: 2, sockets: 1, leaseTtlMs: 1500, env: { LLM_BASE_URL: llm.url } });
  t.teardown(() => cluster.stop());
  const { sessionId, c, from } = await slowTurn(t, cluster);
  // The model has the request: the turn is under way.
  const asked = llm.requests.length;
  for (const end = Date.now() + 5000; llm.requests.length === asked && !llm.requests.some((r) => JSON.stringify(r).includes('answer me slowly')) && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
  const owner = (await cluster.ownerOf('session', sessionId))!;
  owner.child.kill('SIGKILL');
  const reply = await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'the reply, with nothing more sent', from);
  t.match(reply, { payload: { text: 'You said: answer me slowly' } }, 'the reply came');
  t.equal(c.flat().slice(from).filter(is('SERVICE_AGENT_MESSAGE')).length, 1, 'once');
});

/**
 * A TCP relay to nats-server that the test can cut: the connections through it are dropped and new ones refused
 * until it is mended. One process's NATS link goes down while the others' stay up.
 */
async function natsRelay(natsUrl: string) {
  const target = new URL(natsUrl);
  const open = new Set<net.Socket>();
  let cut = false;
  const server = net.createServer((client) => {
    if (cut) return void client.destroy();
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('error', () => {});
      s.on('close', () => (open.delete(s), client.destroy(), upstream.destroy()));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `nats://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut: () => {
      cut = true;
      for (const s of open) s.destroy();
    },
    mend: () => void (cut = false),
    close: () => (cut = true, [...open].forEach((s) => s.destroy()), new Promise<void>((r) => server.close(() => r()))),
  };
}

t.test('a reply published while the socket gateway was cut off from NATS reaches the open socket once it is back', needsNats(), async (t) => {
  const llm = await slowModel(t, 2000);
  // The gateway reaches NATS through a relay the test cuts; the edge and the worker do not.
  let relay: Awaited<ReturnType<typeof natsRelay>> | null = null;
  const cluster = await startCluster({
    workers: 1,
    sockets: 1,
    leaseTtlMs: 1500,
    env: { LLM_BASE_URL: llm.url },
    socketNatsUrl: async (natsUrl) => (relay = await natsRelay(natsUrl)).url,
  });
  t.teardown(async () => {
    await cluster.stop();
    await relay?.close();
  });
  const { c, from } = await slowTurn(t, cluster);
  relay!.cut();
  // The reply is made and published meanwhile (the model takes 2 s), to no subscriber of this gateway.
  await new Promise((r) => setTimeout(r, 5000));
  t.ok(llm.requests.some((r) => JSON.stringify(r).includes('answer me slowly')), 'the model was asked');
  t.equal(c.flat().slice(from).filter(is('SERVICE_AGENT_MESSAGE')).length, 0, 'nothing reached the socket while the gateway was cut off');
  relay!.mend();
  const reply = await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'the reply, once the gateway is back', from);
  t.match(reply, { payload: { text: 'You said: answer me slowly' } });
});
