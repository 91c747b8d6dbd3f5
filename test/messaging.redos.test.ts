/**
 * A 127 KiB adversarial word sent through the Messaging API (the unauthenticated widget path: a connector
 * token is public) is answered like any other message, and the platform stays responsive. The word is the
 * kind that made the offline responder's e-mail pattern scan it from every letter (seconds of CPU). The
 * platform process's CPU time over the turn is read from /proc and bounded generously.
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import { http } from './helpers/http.js';
import { connect, is, messagingProject, T } from './helpers/messaging.js';
import { platformFor } from './helpers/platform.js';

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat (clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

t.test('a 127 KiB adversarial word through the Messaging API is answered promptly', async (t) => {
  const p = await platformFor(t);
  const m = await messagingProject(p);
  const { sessionId, accessToken } = await m.session({ streaming_enabled: false, platform: 'web' });
  const c = await connect(p.socket, { session_id: sessionId, access_token: accessToken });
  t.teardown(() => c.close());
  c.send(T('REQUEST_SERVICE_AGENT_JOIN'), {});
  await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'greeting');

  const word = '-'.repeat(127 * 1024 - 16) + 'a'; // under the 128 KiB frame limit with the JSON around it
  const before = cpuSeconds(p.child.pid!);
  const from = c.flat().length;
  c.send(T('USER_MESSAGE'), { text: word });
  const echo = await c.waitFor(is('USER_MESSAGE'), 'echo', from);
  t.equal(echo.payload.text.length, word.length, 'the whole word was taken');
  const reply = await c.waitFor(is('SERVICE_AGENT_MESSAGE'), 'reply', from);
  const used = cpuSeconds(p.child.pid!) - before;
  t.match(reply.payload.text, /can't help/, 'the agent answers it as any unknown message');
  // Generous: the turn's own work is milliseconds; the quadratic pattern alone took seconds.
  t.ok(used < 2, `the platform spent ${used.toFixed(2)} s of CPU on the turn`);
  t.equal((await http(p.edge, 'GET', '/healthz')).status, 200, 'and still serves');
});
