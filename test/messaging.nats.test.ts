import t from 'tap';
import { eventually } from './helpers/eventually.js';
import { startCluster } from './helpers/cluster.js';
import { http } from './helpers/http.js';
import { connect, handshakeStatus, is, T, messagingProject, type Ev } from './helpers/messaging.js';
import { natsAvailable } from './helpers/nats.js';

// Without nats-server this skips locally; with CI=true natsAvailable() throws, so it fails instead.
const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

t.test('Messaging over NATS: two socket gateways and two workers in separate processes', needsNats, async (t) => {
  const cluster = await startCluster({ workers: 2, sockets: 2, leaseTtlMs: 1500, socketEnv: { MESSAGING_MAX_CONNECTIONS: '3', ASK_TIMEOUT_MS: '5000', MESSAGING_CONNECTION_TTL_MS: '4000' } });
  t.teardown(() => {
    // On a failure, what the processes logged at warn level and above says where it stopped.
    if (!t.passing()) {
      for (const p of [...cluster.sockets, ...cluster.workers, cluster.edge]) {
        const lines = p.stdout().split('\n').filter((l) => /"level":(40|50|60)/.test(l));
        if (lines.length) t.comment(`${p.worker ?? p.socket}:\n${lines.slice(-40).join('\n')}`);
      }
    }
    return cluster.stop();
  });
  const [a, b] = cluster.sockets.map((s) => s.socket);
  const m = await messagingProject(cluster.edge);
  const { sessionId, accessToken } = await m.session({}, a);

  // The whole sequence through gateway A.
  const ca = await connect(a, { session_id: sessionId, access_token: accessToken });
  await ca.waitFor(is('EVENT_BATCH'));
  ca.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  t.equal((await ca.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting')).payload.text, 'Hello, welcome to Acme Dental!');

  // A second socket of the session on gateway B: events from the worker reach both gateways.
  const cb = await connect(b, { session_id: sessionId, access_token: accessToken });
  const batchB = await cb.waitFor(is('EVENT_BATCH'));
  t.same(batchB.payload.events.map((e: Ev) => e.sequence), [1, 2, 3, 4], 'B replays the journal');
  const fromA = ca.flat().length;
  const fromB = cb.flat().length;
  cb.send(T('USER_MESSAGE'), { text: 'When are you open?' }, { client_event_id: 'b-1' });
  const [ra, rb] = await Promise.all([ca.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply on A', fromA), cb.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply on B', fromB)]);
  t.equal(ra.id, rb.id, 'the same event on both gateways');
  t.equal(ra.payload.text, 'We are open from 9am to 5pm, Monday to Friday.');
  t.ok(ca.flat().slice(fromA).some((e) => is('USER_MESSAGE')(e) && e.metadata.custom?.client_event_id === 'b-1'), "A sees B's echo");

  // The connection limit counts sockets on every gateway: 2 open, a third fits, a fourth does not.
  const third = await connect(b, { session_id: sessionId, access_token: accessToken });
  t.match(await handshakeStatus(a, { session_id: sessionId, access_token: accessToken }), { status: 429 }, 'refused on A');
  t.match(await handshakeStatus(b, { session_id: sessionId, access_token: accessToken }), { status: 429 }, 'refused on B');
  await third.close();

  // A drops; it reconnects with its cursor through the other gateway process and misses nothing.
  const last = ca.flat().filter((e) => e.sequence !== null).at(-1)!.sequence!;
  ca.ws.terminate();
  await ca.closed;
  cb.send(T('USER_MESSAGE'), { text: 'Where do I park?' });
  await cb.waitFor((e) => is('SERVICE_AGENT_MESSAGE')(e) && e.payload.text.includes('parking'), 'parking reply');
  const again = await connect(b, { session_id: sessionId, access_token: accessToken, cursor: `seq:${last}` });
  const replay = (await again.waitFor(is('EVENT_BATCH'))).payload.events;
  t.same(replay.map((e: Ev) => e.type), [T('USER_MESSAGE'), T('SERVICE_AGENT_MESSAGE')]);
  t.equal(replay[0].sequence, last + 1);

  // The worker owning the session dies: the session goes on on the other worker, its journal intact.
  const owner = (await cluster.ownerOf('session', sessionId))!;
  owner.child.kill('SIGKILL');
  const before = again.flat().length;
  again.send(T('USER_MESSAGE'), { text: 'When are you open?' });
  const after = await again.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply after failover', before);
  t.equal(after.payload.text, 'We are open from 9am to 5pm, Monday to Friday.');
  const seqs = again.flat().filter((e) => e.sequence !== null).map((e) => e.sequence!);
  t.same(seqs, [...seqs].sort((x, y) => x - y), 'sequences stay in order');
  t.equal(new Set(seqs).size, seqs.length, 'no sequence twice');

  // With no worker left, the session cannot be reached: the sender gets the 7.4 error and the socket stays open.
  for (const w of cluster.workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  const lost = again.flat().length;
  again.send(T('HEARTBEAT'), {}, { n: 9 });
  const [unreachable, noSession] = await Promise.all([
    again.waitFor(is('SYSTEM_MESSAGE'), 'unreachable', lost),
    http(b, 'POST', '/api/v1/sessions', { body: {}, headers: { Authorization: `Bearer ${accessToken}` } }),
  ]);
  t.match(unreachable, { payload: { level: 'SYSTEM_MESSAGE_LEVEL_ERROR', message: 'Error: Unable to retrieve session' }, metadata: { custom: { n: 9 } } });
  t.match(noSession, { status: 500, body: { error: 'Failed to create session' } }, 'no worker to create the session: 500');
  t.equal(again.ws.readyState, again.ws.OPEN);
  // A worker comes back: the session answers again, where it was.
  await cluster.addWorker();
  again.send(T('USER_END_SESSION'));
  t.equal((await cb.waitFor(is('SESSION_END'), 'end reaches B')).payload.reason, 'REASON_USER_END');
  await Promise.all([again.closed, cb.closed]);

  // A gateway dies holding two sockets of a session: they stop counting once its heartbeat is older than the TTL.
  const s2 = await m.session({}, a);
  const onB = [await connect(b, { session_id: s2.sessionId, access_token: s2.accessToken }), await connect(b, { session_id: s2.sessionId, access_token: s2.accessToken })];
  const onA = await connect(a, { session_id: s2.sessionId, access_token: s2.accessToken });
  t.match(await handshakeStatus(a, { session_id: s2.sessionId, access_token: s2.accessToken }), { status: 429 }, 'full');
  cluster.sockets[1].child.kill('SIGKILL');
  await Promise.all(onB.map((c) => c.closed));
  const fresh = await eventually(async () => connect(a, { session_id: s2.sessionId, access_token: s2.accessToken }).catch(() => null), 20_000, 'a fresh connection', 200);
  t.ok(fresh, "the dead gateway's connections no longer count");
  // The one on A still counts (A is alive): with the fresh one, two of three places are taken.
  const another = await eventually(async () => connect(a, { session_id: s2.sessionId, access_token: s2.accessToken }).catch(() => null), 20_000, 'another connection', 200);
  t.match(await handshakeStatus(a, { session_id: s2.sessionId, access_token: s2.accessToken }), { status: 429 }, "a live gateway's connections still count");
  for (const c of [onA, fresh!, another!]) await c.close();
});
