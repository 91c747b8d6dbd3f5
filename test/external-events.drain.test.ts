/**
 * SIGTERM drains promptly while a conversation runs a chain of external-event rounds by itself: a function that
 * waits again at every timeout (`timeout_ms: 0`) and says 200 KB each round. Before the wait's floor and the
 * bound on what waits unread, such a conversation grew its snapshot at every round until no step could commit,
 * and the drain (operator.md: finish in-flight actor events, persist, exit 0) never finished.
 */
import t from 'tap';
import { chatProject } from './helpers/chat.js';
import { http } from './helpers/http.js';
import { removeDir, startPlatform } from './helpers/platform.js';

const LOOP = {
  turn: `function turn(conv, message) { conv.await_external_event('tick-0', { timeout_ms: 0 }); return 'looping'; }`,
  external_event: `function external_event(conv, event) {
    conv.state.n = (conv.state.n || 0) + 1;
    conv.await_external_event('tick-' + conv.state.n, { timeout_ms: 0 });
    conv.say('x'.repeat(200000));
  }`,
};

t.test('SIGTERM while a conversation loops on its own external-event timeouts: the platform drains and exits 0', async (t) => {
  const p = await startPlatform();
  t.teardown(() => {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    removeDir(p.dataDir);
  });
  const loop = await chatProject(p, { name: 'Drain Loop Co', functions: LOOP });
  const id = (await loop.chat('create', {})).body.conversation_id;
  const r = await loop.chat('respond', { conversation_id: id, message: 'go' });
  // Mid-loop: the function has run by itself at least once, and waits (or runs) again. (Without a floor on the
  // wait, the step of the message itself could run the loop and never settle: that answer is a 503, and the loop
  // is running anyway.)
  while (r.status === 200) {
    const a = await http(p.edge, 'GET', `/admin/v1/runtime/actors/conversation/${id}`, { headers: { authorization: `Bearer ${p.operatorToken}` } });
    if ((a.body?.context?.state?.n ?? 0) >= 1) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  t.equal(await p.stop(), 0, 'drained and exited 0');
  t.equal(r.status, 200, `the message that started it was answered: ${r.text.slice(0, 200)}`);
});
