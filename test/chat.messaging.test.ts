/**
 * The Chat API and Messaging API sessions, over HTTP and a real socket against a started platform: a session's
 * id is also its conversation's id, of the same project and environment as a Chat connector's, yet the Chat API
 * neither answers into nor closes it (404, as for a phone call), and the session carries on as if nothing had
 * been asked. A Chat API conversation on the `webchat` channel stays the Chat API's.
 */
import t from 'tap';
import type { Store } from '../store/mod.js';
import { conversationRecords } from '../actors/conversation/record.js';
import { connect, is, messagingProject, T, type MessagingProject } from './helpers/messaging.js';
import { waitForProjections } from './helpers/projections.js';
import { removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';

let p: Platform;
let m: MessagingProject;
let store: Store;
t.before(async () => {
  ({ p, store } = await startPlatformWithStore());
  m = await messagingProject(p, { name: 'Webchat Co' });
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

t.test("a messaging session's conversation is not the Chat API's: respond and close are 404, and the session carries on", async (t) => {
  const { sessionId, accessToken } = await m.session();
  const user = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  user.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await user.waitFor(is('SERVICE_AGENT_MESSAGE'), 'the greeting');

  // Same project, same (live) environment as the Chat connector: still not a Chat API conversation.
  for (const [op, body] of [['respond', { conversation_id: sessionId, message: 'injected through the Chat API' }], ['close', { conversation_id: sessionId }]] as const) {
    const r = await m.chat(op, body);
    t.equal(r.status, 404, `${op} with the session's id`);
    t.same(r.body, { error_message: 'conversation not found' });
  }

  // The session's user writes next and is answered: the conversation was neither closed nor given a turn.
  const from = user.flat().length;
  user.send(T('USER_MESSAGE'), { text: 'When are you opening on Monday?' });
  const reply = await user.waitFor(is('SERVICE_AGENT_MESSAGE'), 'the reply', from);
  t.equal(reply.payload.text, 'We are open from 9am to 5pm, Monday to Friday.');
  t.notOk(user.flat().slice(from).some(is('SESSION_END')), 'the session did not end');
  await waitForProjections(p);
  const rec = (await conversationRecords(store).get(sessionId))!;
  t.match(rec, { channel: 'WEBCHAT', in_progress: true });
  t.same(rec.turns.map((x) => x.user_input), ['', 'When are you opening on Monday?'], 'no turn of the Chat API in its transcript');
  await user.close();
});

t.test('a Chat API conversation on the webchat channel is still answered and closed by the Chat API', async (t) => {
  const created = await m.chat('create', { channel: 'webchat' });
  t.equal(created.status, 200, created.text);
  const id = created.body.conversation_id;
  t.equal((await m.chat('respond', { conversation_id: id, message: 'When are you opening on Monday?' })).body.response, 'We are open from 9am to 5pm, Monday to Friday.');
  t.same((await m.chat('close', { conversation_id: id })).body, { success: true });
});
