/**
 * A session kept alive by heartbeats outlives its conversation's idle expiry (`CONVERSATION_IDLE_MS`, 30 min by
 * default, beside a session idle of 10 min that heartbeats renew): the next message finds the conversation ended,
 * and the session ends with it (SESSION_END, abandoned, answering that message), rather than echoing it and
 * apologising for it and for every later one while nothing reaches the agent.
 */
import t from 'tap';
import { connect, is, messagingProject, T } from './helpers/messaging.js';
import { platformFor } from './helpers/platform.js';
import { eventually } from './helpers/eventually.js';
import { admin } from './helpers/tenants.js';

const APOLOGY = 'Sorry, I encountered an error. Please try again.';

t.test('a message after the conversation expired under a live session ends the session with SESSION_END, no apology', async (t) => {
  const p = await platformFor(t, { env: { CONVERSATION_IDLE_MS: '1000' } });
  const m = await messagingProject(p, { name: 'Expiry Co' });
  const { sessionId, accessToken } = await m.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  t.teardown(() => c.close());
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  // Heartbeats keep the session alive while its conversation expires.
  const a = admin(p);
  const beat = setInterval(() => c.send(T('HEARTBEAT')), 300);
  t.teardown(() => clearInterval(beat));
  await eventually(async () => {
    const r = await a('GET', `/inspector/actors/conversation/${sessionId}`);
    return r.status === 200 && r.body.value === 'ended' ? r : null;
  }, 20_000, 'the conversation ended by its idle expiry');
  clearInterval(beat);
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'are you still there?' }, { turn: 'late' });
  const end = await c.waitFor(is('SESSION_END'), 'the session ends', from);
  t.equal(end.payload.reason, 'REASON_USER_ABANDONED');
  t.same(end.metadata, { custom: { turn: 'late' } }, 'it answers the message');
  t.equal((await c.closed).code, 1000, 'and the socket is closed');
  t.notOk(c.flat().slice(from).some((e) => e.type === T('SYSTEM_MESSAGE') && e.payload.message === APOLOGY), 'no apology');
});
