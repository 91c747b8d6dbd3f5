import t from 'tap';
import { startCluster } from './helpers/cluster.js';
import { connect, handshakeStatus, is, T, messagingProject, type Ev } from './helpers/messaging.js';
import { natsAvailable } from './helpers/nats.js';

// Without nats-server this skips locally; with CI=true natsAvailable() throws, so it fails instead.
const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

t.test('Messaging over NATS: two socket gateways and two workers in separate processes', needsNats, async (t) => {
  const cluster = await startCluster({ workers: 2, sockets: 2, leaseTtlMs: 1500, socketEnv: { MESSAGING_MAX_CONNECTIONS: '3' } });
  t.teardown(() => cluster.stop());
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

  again.send(T('USER_END_SESSION'));
  t.equal((await cb.waitFor(is('SESSION_END'), 'end reaches B')).payload.reason, 'REASON_USER_END');
  await Promise.all([again.closed, cb.closed]);
});
