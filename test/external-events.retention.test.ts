/**
 * Stored external events are kept for `EXTERNAL_EVENT_RETENTION_MS` from their receipt, then a worker's sweep
 * deletes them (an audit: a client sending new ids grew the data directory without bound). A repeat of an id
 * after that is a new event; a conversation's pending wait is not touched by the sweep.
 */
import t from 'tap';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { openStore } from '../store/mod.js';
import { externalEventRecords } from '../actors/conversation/mod.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';
import { externalKey, FUNCTIONS, webhook } from './helpers/external-events.js';
import { http } from './helpers/http.js';

const rebind = (c: ChatProject, p: Platform): ChatProject => ({
  ...c,
  chat: (op, body) => http(p.edge, op === 'close' ? 'PUT' : 'POST', `/v1/${c.accountId}/${c.agentId}/chat/${op}`, { body: body ?? {}, headers: { 'X-API-KEY': c.chatKey, 'X-TOKEN': c.token } }),
});

t.test('an event past its retention is swept, a repeat is a new event, and a pending wait still takes its event', async (t) => {
  let p = await startPlatform({});
  const dataDir = p.dataDir;
  const token = p.operatorToken;
  t.teardown(async () => {
    await p.stop();
    removeDir(dataDir);
  });
  let c = await chatProject(p, { name: 'Retention Co', functions: FUNCTIONS });
  const key = await externalKey(p, c);

  const first = await webhook(p.edge, c, key, { raw: '{"id":"untaken-1"}' });
  t.match(first.body, { status: 'queued', duplicate: false }, first.text);
  const again = await webhook(p.edge, c, key, { raw: '{"id":"untaken-1"}' });
  t.match(again.body, { status: 'queued', duplicate: true }, 'a repeat within the retention is a duplicate');
  const waiting = (await c.chat('create', {})).body.conversation_id;
  t.equal((await c.chat('respond', { conversation_id: waiting, message: 'wait:pending-1' })).body.response, 'Waiting for pending-1');

  t.equal(await p.stop(), 0, 'drained');
  // Past the retention the restarted platform is given (1 s).
  await new Promise((r) => setTimeout(r, 1100));
  const store = await openStore({ dataDir });
  t.teardown(() => store.close());
  const events = externalEventRecords(store);
  // Events in the first and the last slice of the sweep's pass: the last one gone means the pass went over all.
  const marks = ['xev_00' + '0'.repeat(30), 'xev_ff' + 'f'.repeat(30)];
  for (const id of marks) {
    await events.insert({ id, account_id: 'a', project_id: 'p', event_id: id, content_type: 'text/plain', body: 'x', data: null, received_at: new Date(Date.now() - 2000).toISOString(), conversation_id: null, delivered_at: null });
  }
  t.equal(await events.count({ event_id: 'untaken-1' }), 1, 'the event is stored before the sweep');

  p = await startPlatform({ dataDir, env: { OPERATOR_TOKEN: token, EXTERNAL_EVENT_RETENTION_MS: '1000' } });
  c = rebind(c, p);
  let left = marks.length;
  for (let i = 0; i < 100 && left > 0; i++) {
    await new Promise((res) => setTimeout(res, 100));
    store.refresh();
    left = await events.count({ id: { $in: marks } });
  }
  t.equal(left, 0, 'the sweep went over every slice');
  t.equal(await events.count({ event_id: 'untaken-1' }), 0, 'the event nobody took is gone');

  const later = await webhook(p.edge, c, key, { raw: '{"id":"untaken-1"}' });
  t.match(later.body, { status: 'queued', duplicate: false }, 'after the retention a repeat is a new event');
  const taken = await webhook(p.edge, c, key, { raw: '{"id":"pending-1"}' });
  t.match(taken.body, { status: 'delivered', conversation_id: waiting, duplicate: false }, 'the pending wait took its event');
  t.match((await c.chat('respond', { conversation_id: waiting, message: 'hi' })).body.response, /^Event pending-1 arrived/);
});
