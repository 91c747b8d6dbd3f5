/**
 * External events are durable: a wait survives a platform restart (stop and start on the same DATA_DIR), both
 * for the event and for the timeout, and a conversation that does not answer in time is a transient 500 that a
 * retry turns into one delivery.
 */
import t, { type Test } from 'tap';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { openStore } from '../store/mod.js';
import { externalWaitRecords } from '../actors/conversation/mod.js';
import { removeDir, startPlatform, type Platform } from './helpers/platform.js';
import { externalKey, FUNCTIONS, webhook } from './helpers/external-events.js';
import { http } from './helpers/http.js';

/** The project's Chat API calls against another platform process (its ports change on a restart). */
const rebind = (c: ChatProject, p: Platform): ChatProject => ({
  ...c,
  chat: (op, body) => http(p.edge, op === 'close' ? 'PUT' : 'POST', `/v1/${c.accountId}/${c.agentId}/chat/${op}`, { body: body ?? {}, headers: { 'X-API-KEY': c.chatKey, 'X-TOKEN': c.token } }),
});

let p: Platform;
let c: ChatProject;
let key: string;
let dataDir: string;
let token: string;
const env = { FUNCTION_TIMEOUT_MS: '6000', ASK_TIMEOUT_MS: '1500' };

t.before(async () => {
  p = await startPlatform({ env });
  dataDir = p.dataDir;
  token = p.operatorToken;
  c = await chatProject(p, { name: 'Durable Co', functions: FUNCTIONS });
  key = await externalKey(p, c);
});
t.teardown(async () => {
  await p.stop();
  removeDir(dataDir);
});

const wait = async (t: Test, eventId: string, timeoutMs?: number) => {
  const id = (await c.chat('create', {})).body.conversation_id;
  const r = await c.chat('respond', { conversation_id: id, message: `wait:${eventId}${timeoutMs ? `:${timeoutMs}` : ''}` });
  t.equal(r.body.response, `Waiting for ${eventId}`);
  return id;
};

t.test('a restart while waiting: the event resumes the conversation, and a deadline that passed while down fires', async (t) => {
  const forEvent = await wait(t, 'restart-1');
  const forTimeout = await wait(t, 'restart-2', 2500);
  t.equal(await p.stop(), 0, 'drained');
  // Down for longer than the second wait's deadline.
  await new Promise((r) => setTimeout(r, 2600));
  // The test reads the store (opened while the platform is down, so its open races no commit, and kept open).
  const store = await openStore({ dataDir });
  t.teardown(() => store.close());
  const waits = externalWaitRecords(store);
  const waitsOf = (id: string) => {
    store.refresh();
    return waits.find({ conversation_id: id });
  };
  t.match(await waitsOf(forEvent), [{ event_id: 'restart-1' }], 'the pending wait is stored');
  // Waits nothing settled, their deadline long past (as an older version left them): in the first and the last
  // slice of the sweep's pass, so that the last one gone means the pass went over every wait.
  const stale = ['xev_00' + '0'.repeat(30), 'xev_ff' + 'f'.repeat(30)];
  for (const id of stale) {
    await waits.insert({ id, project_id: 'p', event_id: id, conversation_id: 'gone', deadline: new Date(Date.now() - 30 * 86_400_000).toISOString() });
  }
  p = await startPlatform({ dataDir, env: { ...env, OPERATOR_TOKEN: token } });
  c = rebind(c, p);
  let left = stale.length;
  for (let i = 0; i < 100 && left > 0; i++) {
    await new Promise((res) => setTimeout(res, 100));
    store.refresh();
    left = await waits.count({ id: { $in: stale } });
  }
  t.equal(left, 0, 'the worker swept the waits whose deadline passed long ago');
  t.match(await waitsOf(forEvent), [{ event_id: 'restart-1' }], 'the pending wait survived the restart and the sweep');
  const r = await webhook(p.edge, c, key, { raw: '{"id":"restart-1"}' });
  t.equal(r.status, 201, r.text);
  t.match(r.body, { status: 'delivered', conversation_id: forEvent }, 'the restored conversation took it');
  t.same(await waitsOf(forEvent), [], 'the wait it settled is deleted');
  const next = await c.chat('respond', { conversation_id: forEvent, message: 'When are you open?' });
  t.match(next.body.response, /^Event restart-1 arrived/);
  // The timer of the other one was restored from its snapshot and fired.
  let response = '';
  for (let i = 0; i < 50 && !response.startsWith('No answer'); i++) {
    await new Promise((res) => setTimeout(res, 200));
    response = (await c.chat('respond', { conversation_id: forTimeout, message: 'When are you open?' })).body.response ?? '';
  }
  t.match(response, /^No answer for restart-2/, 'the timeout ran after the restart');
  t.same(await waitsOf(forTimeout), [], 'the wait its deadline settled is deleted');
});

t.test('a conversation that does not answer in time is a 500 {error_message}; the retry delivers once', async (t) => {
  const id = await wait(t, 'slow-1');
  // The conversation is busy in a slow turn (4 s) longer than ASK_TIMEOUT_MS (1.5 s).
  const slow = c.chat('respond', { conversation_id: id, message: 'slow' });
  await new Promise((r) => setTimeout(r, 300));
  const busy = await webhook(p.edge, c, key, { raw: '{"id":"slow-1"}' });
  t.equal(busy.status, 500, busy.text);
  t.same(busy.body, { error_message: 'the event could not be processed now; retry with exponential backoff' });
  await slow;
  let retry = await webhook(p.edge, c, key, { raw: '{"id":"slow-1"}' });
  for (let i = 0; i < 20 && retry.status !== 201; i++) {
    await new Promise((r) => setTimeout(r, 500));
    retry = await webhook(p.edge, c, key, { raw: '{"id":"slow-1"}' });
  }
  t.equal(retry.status, 201, retry.text);
  t.equal(retry.body.status, 'delivered');
  t.equal(retry.body.duplicate, true, 'the event was stored by the first attempt');
  const next = await c.chat('respond', { conversation_id: id, message: 'When are you open?' });
  t.equal(next.body.response.match(/Event slow-1 arrived/g)?.length, 1, 'resumed once');
});
