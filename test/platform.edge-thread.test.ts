/**
 * The embedded default's edge thread (`platform/edge-thread.ts`, docs/runtime.md "The edge thread"): the edge
 * serves from a thread of its own and reaches the main thread's actors over a port, sees the main thread's
 * worker, shares its tenancy invalidations and metrics both ways, and drains with the process; `EDGE_THREAD=off`
 * keeps it on the main thread.
 */
import t from 'tap';
import { chatProject } from './helpers/chat.js';
import { http } from './helpers/http.js';
import { platformFor, removeDir, startPlatform } from './helpers/platform.js';

t.test('embedded, the edge runs in a thread of its own and reaches the actors over its port', async (t) => {
  const p = await platformFor(t);
  const admin = { headers: { authorization: `Bearer ${p.operatorToken}` } };
  const runtime = (await http(p.edge, 'GET', '/admin/v1/runtime', admin)).body;
  t.equal(runtime.transport, 'thread', 'the edge thread’s transport');
  t.equal(runtime.workers.length, 1, 'the main thread’s worker, answered over the port');
  t.same([...runtime.kinds].sort(), ['alert-rule', 'call', 'conversation', 'counter', 'delivery', 'session'], 'the kinds the main thread hosts');
  t.same([...runtime.workers[0].kinds].sort(), [...runtime.kinds].sort(), 'as its worker says');
  t.same(runtime.unownedShards, []);
  t.same(runtime.degraded, []);
  t.equal((await http(p.edge, 'GET', '/healthz')).status, 200);

  const c = await chatProject(p, { name: 'threads', functions: { turn: `function turn(conv, m) { if (m === 'hours') return 'open at ' + conv.variables.open_hour; }` } });
  const page = `/v1/agents/${c.agentId}/real-time-configs/live/variables`;
  const id = (await c.chat('create', {})).body.conversation_id;
  t.ok(id);
  // The page is read by the worker (main thread) through its cache; the change is made on the edge thread.
  for (const hour of [9, 7, 11]) {
    t.equal((await c.api('PATCH', page, { variables: { open_hour: hour } })).status, 200);
    const turn = await c.chat('respond', { conversation_id: id, message: 'hours' });
    t.equal(turn.body.response, `open at ${hour}`, 'the next turn sees the change at once');
  }

  // One scrape of the edge: the edge thread's answers and the main thread's live actors and sandbox calls.
  const text = (await http(p.edge, 'GET', '/metrics')).text;
  t.match(text, /switchboard_http_responses_total\{family="chat",status="200"\} \d+/, 'counted on the edge thread');
  t.match(text, /switchboard_live_actors\{kind="conversation"\} [1-9]/, 'counted on the main thread');
  t.match(text, /switchboard_sandbox_calls_total\{outcome="ok"\} [1-9]/, 'counted on the main thread');
  t.equal(text.match(/^switchboard_process_cpu_seconds_total /gm)?.length, 1, 'the process’s own series once');

  const code = await p.stop();
  t.equal(code, 0, 'the process drains its edge thread and exits cleanly');
});

t.test('EDGE_THREAD=off keeps the edge on the main thread', async (t) => {
  const p = await platformFor(t, { env: { EDGE_THREAD: 'off' } });
  const runtime = (await http(p.edge, 'GET', '/admin/v1/runtime', { headers: { authorization: `Bearer ${p.operatorToken}` } })).body;
  t.equal(runtime.transport, 'inproc');
  t.equal(runtime.workers.length, 1);
  const c = await chatProject(p, { name: 'one thread' });
  t.equal((await c.chat('create', {})).status, 200);
});

t.test('an EDGE_THREAD that is neither on nor off stops the start with the reason', async (t) => {
  await t.rejects(
    startPlatform({ env: { EDGE_THREAD: 'yes' } }).then(async (p) => {
      await p.stop();
      removeDir(p.dataDir);
    }),
    /EDGE_THREAD/,
  );
});
