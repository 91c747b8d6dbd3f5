import t from 'tap';
import { openStore } from '../store/mod.js';
import { conversationRecords } from '../actors/conversation/record.js';
import { chatProject } from './helpers/chat.js';
import { startCluster } from './helpers/cluster.js';
import { natsAvailable } from './helpers/nats.js';import { waitForProjections } from './helpers/projections.js';


// Without nats-server this skips locally; with CI=true natsAvailable() throws, so it fails instead.
const needsNats = natsAvailable() ? {} : { skip: 'nats-server is not installed' };

t.test('the Chat API over NATS: edge and workers in separate processes, and a worker dying mid-conversation', needsNats, async (t) => {
  const cluster = await startCluster({ workers: 2, leaseTtlMs: 1500 });
  t.teardown(() => cluster.stop());
  const c = await chatProject(cluster.edge, {
    functions: { turn: `function turn(conv, m) { conv.state.n = (conv.state.n ?? 0) + 1; if (m === 'count') return 'n=' + conv.state.n; }` },
  });
  const store = await openStore({ dataDir: cluster.dataDir });
  t.teardown(() => store.close());
  const records = conversationRecords(store);

  const created = await c.chat('create', {});
  t.equal(created.status, 200, created.text);
  const id = created.body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: id, message: 'When do you open?' })).body.response, 'We are open from 9am to 5pm, Monday to Friday.');
  t.equal((await c.chat('respond', { conversation_id: id, message: 'count' })).body.response, 'n=2');

  const owner = (await cluster.ownerOf('conversation', id))!;
  owner.child.kill('SIGKILL');
  const after = await c.chat('respond', { conversation_id: id, message: 'count' });
  t.equal(after.status, 200, after.text);
  t.equal(after.body.response, 'n=3', 'the conversation continued on another worker with its state');
  t.not((await cluster.ownerOf('conversation', id))?.worker, owner.worker);

  t.same((await c.chat('close', { conversation_id: id })).body, { success: true });
  await waitForProjections(cluster.edge);
  const rec = (await records.get(id))!;
  t.match(rec, { in_progress: false, num_turns: 4, channel: 'CHAT', environment: 'live' });
  t.same(rec.turns.map((x) => x.user_input), ['', 'When do you open?', 'count', 'count']);
});

t.test('the Chat API goes on when its NATS server restarts on an empty JetStream store', needsNats, async (t) => {
  const cluster = await startCluster({ workers: 2, leaseTtlMs: 1500 });
  t.teardown(() => cluster.stop());
  const c = await chatProject(cluster.edge, {
    functions: { turn: `function turn(conv, m) { if (m === 'count') { conv.state.n = (conv.state.n ?? 0) + 1; return 'n=' + conv.state.n; } }` },
  });
  const id = (await c.chat('create', {})).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: id, message: 'count' })).body.response, 'n=1');

  await cluster.restartNats(true);
  // As a client would: retry while the workers take their shards again (a 503 or 504 meanwhile).
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await c.chat('respond', { conversation_id: id, message: 'When do you open?' });
    if (r.status === 200) break;
    t.ok(r.status >= 500, `${r.status} while the shards are taken again: ${r.text}`);
    if (Date.now() > deadline) throw new Error(`no turn answered after the restart: ${r.status} ${r.text}`);
    await new Promise((res) => setTimeout(res, 250));
  }
  const after = await c.chat('respond', { conversation_id: id, message: 'count' });
  t.equal(after.status, 200, after.text);
  t.equal(after.body.response, 'n=2', 'the conversation went on with its state');
});

t.test('a real-time config change reaches the next turn on a worker at once (its cache is invalidated over NATS)', needsNats, async (t) => {
  const cluster = await startCluster({ workers: 1 });
  t.teardown(() => cluster.stop());
  const c = await chatProject(cluster.edge, {
    functions: { turn: `function turn(conv, m) { if (m === 'hours') return 'open at ' + conv.variables.open_hour; }` },
  });
  const page = `/v1/agents/${c.agentId}/real-time-configs/live/variables`;
  const id = (await c.chat('create', {})).body.conversation_id;
  t.equal((await c.api('PATCH', page, { variables: { open_hour: 9 } })).status, 200);
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hours' })).body.response, 'open at 9');
  t.equal((await c.chat('respond', { conversation_id: id, message: 'hours' })).body.response, 'open at 9', "from the worker's cache");
  for (const hour of [7, 8, 6]) {
    await c.api('PATCH', page, { variables: { open_hour: hour } });
    t.equal((await c.chat('respond', { conversation_id: id, message: 'hours' })).body.response, `open at ${hour}`, 'the next turn after the change');
  }
});
