/**
 * A model slower than the ask timeout (ASK_TIMEOUT_MS): its turn is waited for (`Config.turnWaitMs`), not called
 * overloaded while it goes on. A messaging session answers the slow message, then the one sent meanwhile, each
 * once and in order; the conversation keeps both turns. A model that hangs past LLM_TIMEOUT_MS gets the
 * responder's own apology ("having trouble responding"), and the message sent meanwhile is still answered. The
 * Chat API answers a slow turn instead of 503.
 */
import t, { type Test } from 'tap';
import { startLlmStandin } from './helpers/llm-standin.js';
import { connect, is, messagingProject, T, type MessagingProject } from './helpers/messaging.js';
import { platformFor, type Platform } from './helpers/platform.js';

const OVERLOAD = 'Our system is experiencing high load. Please try again in a moment.';
const TROUBLE = "Sorry, I'm having trouble responding right now. Please try again.";

let p: Platform;
let m: MessagingProject;

t.before(async () => {
  // "slow": answered after more than two ask timeouts; "hang": never within the model's time limit.
  const llm = await startLlmStandin((body) => {
    const users = (body.messages as Array<{ role: string; content: string }>).filter((x) => x.role === 'user');
    const last = users[users.length - 1]?.content ?? '';
    if (/hang/.test(last)) return { delayMs: 60_000, text: 'too late' };
    return { delayMs: /slow/.test(last) ? 6000 : 0, text: users.length ? `You said: ${last}` : 'Hello from the model!' };
  });
  t.teardown(() => llm.close());
  p = await platformFor(t, { env: { LLM_BASE_URL: llm.url, LLM_TIMEOUT_MS: '8000', ASK_TIMEOUT_MS: '2500' } });
  m = await messagingProject(p);
});

async function joined(t: Test) {
  const { sessionId, accessToken } = await m.session();
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  t.teardown(() => c.close());
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'));
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  return { c, sessionId };
}

const errors = (events: any[]) => events.filter((e) => e.type === T('SYSTEM_MESSAGE') && e.payload?.level === 'SYSTEM_MESSAGE_LEVEL_ERROR').map((e) => e.payload.message);
const agentTexts = (events: any[]) => events.filter(is('SERVICE_AGENT_MESSAGE')).map((e) => e.payload.text);

t.test('a slow reply is waited for, and the message sent meanwhile is answered after it', async (t) => {
  const { c } = await joined(t);
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'a slow one' }, { n: 1 });
  c.send(T('USER_MESSAGE'), { text: 'the second' }, { n: 2 });
  await c.waitFor((e) => is('SERVICE_AGENT_MESSAGE')(e) && e.payload?.text === 'You said: the second', 'the second answered', from);
  const events = c.flat().slice(from);
  t.same(errors(events), [], 'no error event (no "high load")');
  t.same(agentTexts(events), ['You said: a slow one', 'You said: the second'], 'both answered, in order, once');
});

t.test('a reply past the model time limit gets its apology; the message sent meanwhile is answered', async (t) => {
  const { c } = await joined(t);
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'please hang' }, { n: 1 });
  c.send(T('USER_MESSAGE'), { text: 'still there?' }, { n: 2 });
  await c.waitFor((e) => is('SERVICE_AGENT_MESSAGE')(e) && e.payload?.text === 'You said: still there?', 'the second answered', from);
  const events = c.flat().slice(from);
  t.same(errors(events), [TROUBLE], 'the responder\'s apology for the first, not "high load"');
  t.notOk(errors(events).includes(OVERLOAD));
  t.match(events.find((e) => e.payload?.message === TROUBLE), { metadata: { custom: { n: 1 } } }, 'for the first message');
});

t.test('the Chat API answers a slow turn', async (t) => {
  const created = await m.chat('create', {});
  t.equal(created.status, 200, created.text);
  const r = await m.chat('respond', { conversation_id: created.body.conversation_id, message: 'a slow question' });
  t.equal(r.status, 200, r.text);
  t.equal(r.body.response, 'You said: a slow question');
});
