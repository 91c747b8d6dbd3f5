/**
 * An agent whose responder fails (an OpenAI-compatible server that answers 500, breaks its stream mid-reply or
 * answers what is not valid data): the Messaging API tells the client with contract 7.4's error events, "unable
 * to start" for the greeting, "having trouble responding" for a message the model did not answer, "encountered
 * an error" for one whose answer broke off or was invalid, not with an agent message; the session goes on, and the
 * next message is answered. The Chat API answers the same apology as the turn's response (docs/chat.md).
 */
import t, { type Test } from 'tap';
import { startLlmStandin, type StandinRound } from './helpers/llm-standin.js';
import { connect, is, messagingProject, T, type MessagingProject } from './helpers/messaging.js';
import { platformFor, type Platform } from './helpers/platform.js';

const UNABLE_TO_START = "Sorry, I'm unable to start a conversation right now. Please try again later.";
const TROUBLE = "Sorry, I'm having trouble responding right now. Please try again.";
const ENCOUNTERED = 'Sorry, I encountered an error. Please try again.';

/** What the stand-in answers a message with these words: a stream cut mid-reply, or data that is no completion. */
const BROKEN: Record<string, StandinRound> = {
  'break off': { text: 'Our opening hours are nine to five on weekdays', breakAfter: 3 },
  'not json': { raw: { type: 'application/json', body: 'not json at all' } },
  'bad event': { raw: { type: 'text/event-stream', body: 'data: {"choices": [\n\n' } },
  'no events': { raw: { type: 'text/plain', body: 'hello, I am not a stream' } },
  'no completion': { raw: { type: 'application/json', body: '{"object":"chat.completion","choices":[]}' } },
};

let p: Platform;
let m: MessagingProject;
/** How the stand-in fails the greeting (a request with no user message): not, with a 500, or with its stream cut. */
let failGreeting: false | 'status' | 'break off' = false;

t.before(async () => {
  const llm = await startLlmStandin((body) => {
    const users = (body.messages as Array<{ role: string; content: string }>).filter((x) => x.role === 'user');
    const last = users[users.length - 1]?.content ?? '';
    if (users.length === 0 && failGreeting) return failGreeting === 'status' ? { status: 500 } : BROKEN[failGreeting];
    if (users.length > 0 && /fail/.test(last)) return { status: 500, body: '{"error":{"message":"model overloaded"}}' };
    const broken = Object.keys(BROKEN).find((k) => users.length > 0 && last.includes(k));
    if (broken) return BROKEN[broken];
    return { text: users.length ? `You said: ${last}` : 'Hello from the model!' };
  });
  t.teardown(() => llm.close());
  p = await platformFor(t, { env: { LLM_BASE_URL: llm.url } });
  m = await messagingProject(p);
});

const errorOf = (text: string) => (e: { type: string; payload: any }) => e.type === T('SYSTEM_MESSAGE') && e.payload?.level === 'SYSTEM_MESSAGE_LEVEL_ERROR' && e.payload?.message === text;

/** A new session's socket, its join sent (the greeting failing or not). */
async function joining(t: Test, greetingFails: typeof failGreeting) {
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

t.test('a message whose answer breaks off mid-reply or is not valid data: the 7.4 "encountered an error" event, no agent message; the next message is answered', async (t) => {
  const c = await joining(t, false);
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  for (const [n, words] of Object.keys(BROKEN).entries()) {
    const from = c.flat().length;
    c.send(T('USER_MESSAGE'), { text: `please ${words} now` }, { n });
    const error = await c.waitFor((e) => e.type === T('SYSTEM_MESSAGE') && e.payload?.level === 'SYSTEM_MESSAGE_LEVEL_ERROR', `the error event (${words})`, from);
    t.match(error, { sequence: null, payload: { message: ENCOUNTERED }, metadata: { custom: { n } } }, `${words}: stream interrupted or invalid data`);
    t.notOk(c.flat().slice(from).some(is('SERVICE_AGENT_MESSAGE')), `${words}: no agent message`);
  }
  const next = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'hello again' });
  t.match(await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'the next answer', next), { payload: { text: 'You said: hello again' } });
});

for (const how of ['status', 'break off'] as const) {
  t.test(`a greeting the responder fails on (${how}): the agent joins, "unable to start" instead of a greeting; messages are then answered`, async (t) => {
    const c = await joining(t, how);
  await c.waitFor(is('SERVICE_AGENT_JOINED'), 'joined');
    await c.waitFor(errorOf(UNABLE_TO_START), 'the error event');
    t.notOk(c.flat().some(is('SERVICE_AGENT_MESSAGE')), 'no greeting');
    failGreeting = false;
    const from = c.flat().length;
    c.send(T('USER_MESSAGE'), { text: 'are you there?' });
    t.match(await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'the answer', from), { payload: { text: 'You said: are you there?' } });
  });
}

t.test('the Chat API answers the apology as the response', async (t) => {
  failGreeting = false;
  const created = await m.chat('create', {});
  t.equal(created.status, 200, created.text);
  const r = await m.chat('respond', { conversation_id: created.body.conversation_id, message: 'fail please' });
  t.equal(r.status, 200, r.text);
  t.equal(r.body.response, TROUBLE);
  for (const words of Object.keys(BROKEN)) {
    const broken = await m.chat('respond', { conversation_id: created.body.conversation_id, message: `please ${words}` });
    t.equal(broken.status, 200, broken.text);
    t.equal(broken.body.response, ENCOUNTERED, `${words}: the contract's words for a broken or invalid answer`);
  }
});
