/**
 * A conversation created through the Messaging API (token, session, /ws, agent join, a user message) is
 * visible to the Conversations API as a client sees it: in the list with channel WEBCHAT (and only under
 * that channel filter), with its turns, in progress and then ended, and in the concurrency series.
 */
import t from 'tap';
import { eventually } from './helpers/eventually.js';
import { http } from './helpers/http.js';
import { conversationsClient, conversationsKey } from './helpers/conversations.js';
import { connect, is, T, type MessagingProject, messagingProject } from './helpers/messaging.js';
import { platformFor, type Platform } from './helpers/platform.js';

let p: Platform;
let m: MessagingProject;
let get: ReturnType<typeof conversationsClient>;

t.before(async () => {
  p = await platformFor(t);
  m = await messagingProject(p);
  get = conversationsClient(p, m, await conversationsKey(p, m));
});

const FIVE_MIN = 5 * 60_000;

t.test('a messaging session is a WEBCHAT conversation with its turns, and counts in the concurrency series', async (t) => {
  const before = Date.now();
  const tok = await http(p.socket, 'POST', '/api/v1/access-token', { body: {}, headers: { 'X-Token': m.connectorToken, 'X-Host': 'example.com' } });
  t.equal(tok.status, 200, tok.text);
  const s = await http(p.socket, 'POST', '/api/v1/sessions', { body: { platform: 'ios-web' }, headers: { Authorization: `Bearer ${tok.body.access_token}` } });
  t.equal(s.status, 200, s.text);
  const sessionId: string = s.body.session_id;

  const c = await connect(p.socket, { session_id: sessionId, access_token: tok.body.access_token });
  await c.waitFor(is('EVENT_BATCH'), 'replay');
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'), {}, { client_event_id: 'j1' });
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: 'When are you open on Monday?' }, { client_event_id: 'u1' });
  const reply = await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply', from);

  const window = { start_time: new Date(before - FIVE_MIN).toISOString(), end_time: new Date(Date.now() + FIVE_MIN).toISOString() };
  const listed = async (query: Record<string, string>) => {
    const r = await get({ ...window, ...query });
    t.equal(r.status, 200, r.text);
    return (r.body.conversations as any[]).filter((x) => x.id === sessionId);
  };

  // In progress: listed under WEBCHAT with both turns (the greeting and the user's message).
  const live = await eventually(async () => {
    const [row] = await listed({ channel: 'WEBCHAT' });
    return row && row.turns.length === 2 ? row : null;
  }, 10_000, 'the conversation listed with two turns', 50);
  t.ok(live, 'listed with channel=WEBCHAT');
  t.match(live, { id: sessionId, channel: 'WEBCHAT', in_progress: true, project_id: m.agentId, account_id: m.accountId });
  t.equal(live.turns[0].user_input, '');
  t.equal(live.turns[1].user_input, 'When are you open on Monday?');
  t.equal(live.turns[1].agent_response, reply.payload.text);
  t.same(await listed({ channel: 'CHAT' }), [], 'not listed under another channel');
  t.equal((await listed({})).length, 1, 'listed without a channel filter');

  // The concurrency series counts it from its start (in progress: going on until now).
  const startedAt = Date.parse(live.started_at);
  const slotOf = (iso: string) => Math.floor(Date.parse(iso) / FIVE_MIN);
  const peakAtStart = async () => {
    const r = await get(window, { version: 'v1', path: '/concurrency' });
    t.equal(r.status, 200, r.text);
    const at = (r.body.intervals as any[]).find((i) => slotOf(i.time) === Math.floor(startedAt / FIVE_MIN));
    return at?.max_concurrent_conversations;
  };
  t.equal(await eventually(async () => ((await peakAtStart()) === 1 ? 1 : null), 10_000, 'its interval to count it', 50), 1, 'in progress: counted in its interval');

  // Ended: still listed under WEBCHAT, with its duration, its turns and its span in the series.
  c.send(T('USER_END_SESSION'), {}, { client_event_id: 'end' });
  await c.waitFor(is('SESSION_END'), 'session end');
  await c.closed;
  const ended = await eventually(async () => {
    const [row] = await listed({ channel: 'WEBCHAT', in_progress: 'false' });
    return row ?? null;
  }, 10_000, 'the ended conversation listed', 50);
  t.ok(ended, 'listed as ended with channel=WEBCHAT');
  t.match(ended, { id: sessionId, channel: 'WEBCHAT', in_progress: false, num_turns: 2 });
  t.type(ended.total_duration, 'number', 'its duration is known');
  t.equal(ended.turns.length, 2);
  t.equal(ended.turns[1].user_input, 'When are you open on Monday?');
  t.same(await listed({ channel: 'WEBCHAT', in_progress: 'true' }), [], 'no longer in progress');
  t.equal(await peakAtStart(), 1, 'ended: counted in its interval');
});
