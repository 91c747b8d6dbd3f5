/**
 * The External Events API's per-project rate limit (docs/external-events.md, "Rate limit"), over HTTP against a
 * started platform: a project's webhook requests and bridge-ended notifications share one token bucket; past it,
 * 429 `{error_message}` with `Retry-After` and nothing stored; another project keeps its own bucket, and a key
 * with a wrong secret spends no token.
 */
import t from 'tap';
import type { Store } from '../store/mod.js';
import { externalEventKey, externalEventRecords } from '../actors/conversation/mod.js';
import { chatProject, type ChatProject } from './helpers/chat.js';
import { http } from './helpers/http.js';
import { removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';
import { externalKey, FUNCTIONS, webhook } from './helpers/external-events.js';

const BURST = 3;
let p: Platform;
let store: Store;

t.before(async () => {
  // A token a thousand seconds: within the test, a bucket holds only its burst.
  ({ p, store } = await startPlatformWithStore({ env: { EXTERNAL_EVENT_RATE_PER_PROJECT: '0.001', EXTERNAL_EVENT_BURST_PER_PROJECT: String(BURST) } }));
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

const send = (proj: ChatProject, key: string, id: string) => webhook(p.edge, proj, key, { raw: JSON.stringify({ id }) });
const stored = (proj: ChatProject, id: string) => externalEventRecords(store).get(externalEventKey(proj.agentId, id));

t.test('past its burst a project gets 429 with Retry-After, and the refused event is not stored', async (t) => {
  const c = await chatProject(p, { name: 'Flood Co', functions: FUNCTIONS });
  const key = await externalKey(p, c);
  for (let i = 0; i < BURST; i++) {
    const r = await send(c, key, `ok-${i}`);
    t.equal(r.status, 201, r.text);
  }
  const refused = await send(c, key, 'over');
  t.equal(refused.status, 429, refused.text);
  t.same(refused.body, { error_message: 'rate limit exceeded for this project; retry after the Retry-After header' });
  const after = Number(refused.headers.get('retry-after'));
  t.ok(Number.isInteger(after) && after >= 1, `Retry-After in whole seconds (${refused.headers.get('retry-after')})`);
  t.ok(await stored(c, 'ok-0'), 'an accepted event is stored');
  t.equal(await stored(c, 'over'), null, 'the refused one is not');
});

t.test('bridge-ended shares the bucket of its project', async (t) => {
  const c = await chatProject(p, { name: 'Bridge Flood Co', functions: FUNCTIONS });
  const key = await externalKey(p, c);
  const bridge = () => http(p.edge, 'POST', '/internal/v1/agentic-dial/bridge-ended', {
    body: { conversation_id: 'no-such-conversation', bridge_duration_seconds: 1, call_duration_seconds: 2 },
    headers: { 'x-api-key': key },
  });
  for (let i = 0; i < BURST; i++) t.equal((await bridge()).status, 404, 'within the burst: the unknown conversation is 404');
  const refused = await bridge();
  t.equal(refused.status, 429, refused.text);
  t.match(refused.body, { error_message: /rate limit exceeded for this project/ });
  t.ok(refused.headers.get('retry-after'), 'with Retry-After');
  t.equal((await send(c, key, 'after-bridge')).status, 429, 'and the webhook is refused too: one bucket');
});

t.test('one project over its limit leaves another\'s alone; a wrong secret spends no token', async (t) => {
  const a = await chatProject(p, { name: 'Noisy Co', functions: FUNCTIONS });
  const b = await chatProject(p, { name: 'Quiet Co', functions: FUNCTIONS });
  const aKey = await externalKey(p, a);
  const bKey = await externalKey(p, b);
  for (let i = 0; i <= BURST; i++) await send(a, aKey, `noise-${i}`);
  t.equal((await send(a, aKey, 'noise-more')).status, 429, 'the noisy project is limited');
  // The same key id with another secret: refused before any bucket is touched.
  const wrong = `${bKey.slice(0, -4)}${bKey.endsWith('aaaa') ? 'bbbb' : 'aaaa'}`;
  for (let i = 0; i < BURST + 2; i++) t.equal((await send(b, wrong, `wrong-${i}`)).status, 401, 'a wrong secret is 401');
  for (let i = 0; i < BURST; i++) {
    const r = await send(b, bKey, `quiet-${i}`);
    t.equal(r.status, 201, `the quiet project's own burst is whole (${i + 1} of ${BURST})`);
  }
  t.equal((await send(b, bKey, 'quiet-over')).status, 429, 'then it too is limited');
});
