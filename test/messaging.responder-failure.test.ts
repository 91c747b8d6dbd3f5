/**
 * An agent whose responder fails (an OpenAI-compatible server that answers 500): the Messaging API tells the
 * client with contract 7.4's error events, "unable to start" for the greeting and "having trouble responding"
 * for a message, not with an agent message; the session goes on, and the next message is answered. The Chat
 * API answers the apology as the turn's response (docs/chat.md).
 */
import t, { type Test } from 'tap';
import { startLlmStandin } from './helpers/llm-standin.js';
import { connect, is, messagingProject, T, type MessagingProject } from './helpers/messaging.js';
import { platformFor, type Platform } from './helpers/platform.js';

const UNABLE_TO_START = "Sorry, I'm unable to start a conversation right now. Please try again later.";
const TROUBLE = "Sorry, I'm having trouble responding right now. Please try again.";

let p: Platform;
let m: MessagingProject;
/** Whether the stand-in fails the greeting (a request with no user message). */
let failGreeting = false;

t.before(async () => {
  const llm = await startLlmStandin((body) => {
    const users = (body.messages as Array<{ role: string; content: string }>).filter((x) => x.role === 'user');
    const last = users[users.length - 1]?.content ?? '';
    if (users.length === 0 ? failGreeting : /fail/.test(last)) return { status: 500, body: '{"error":{"message":"model overloaded"}}' };
    return { text: users.length ? `You said: ${last}` : 'Hello from the model!' };
  });
  t.teardown(() => llm.close());
  p = await platformFor(t, { env: { LLM_BASE_URL: llm.url } });
  m = await messagingProject(p);
});

const errorOf = (text: string) => (e: { type: string; payload: any }) => e.type === T('SYSTEM_MESSAGE') && e.payload?.level === 'SYSTEM_MESSAGE_LEVEL_ERROR' && e.payload?.message === text;

/** A new session's socket, its join sent (the greeting failing or not). */
async function joining(t: Test, greetingFails: boolean) {
  failGreeting = greetingFails;
  const { sessionId, accessToken } = await m.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  t.teardown(() => c.close());
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  return c;
}

t.test('a message the responder fails on: the 7.4 error event, no agent message; the next message is answered', async (t) => {
  const c = await joining(t, false);
  t.match(await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting'), { payload: { text: 'Hello from the model!' } });
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'please fail now' }, { n: 1 });
  const error = await c.waitFor(errorOf(TROUBLE), 'the error event', from);
  t.match(error, { sequence: null, metadata: { custom: { n: 1 } } }, 'transient, with the message\'s custom metadata');
  t.notOk(c.flat().slice(from).some(is('SERVICE_AGENT_MESSAGE')), 'no agent message said the apology');
  const next = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'hello again' });
  t.match(await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'the next answer', next), { payload: { text: 'You said: hello again' } });
});

t.test('a greeting the responder fails on: the agent joins, "unable to start" instead of a greeting; messages are then answered', async (t) => {
  const c = await joining(t, true);
  await c.waitFor(is('SERVICE_AGENT_JOINED'), 'joined');
  await c.waitFor(errorOf(UNABLE_TO_START), 'the error event');
  t.notOk(c.flat().some(is('SERVICE_AGENT_MESSAGE')), 'no greeting');
  failGreeting = false;
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'are you there?' });
  t.match(await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'the answer', from), { payload: { text: 'You said: are you there?' } });
});

t.test('the Chat API answers the apology as the response', async (t) => {
  failGreeting = false;
  const created = await m.chat('create', {});
  t.equal(created.status, 200, created.text);
  const r = await m.chat('respond', { conversation_id: created.body.conversation_id, message: 'fail please' });
  t.equal(r.status, 200, r.text);
  t.equal(r.body.response, TROUBLE);
});
